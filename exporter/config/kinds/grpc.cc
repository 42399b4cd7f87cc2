// probes.grpc: its section of the configuration (the keys: docs/configuration.md).
#include "exporter/config/kinds/grpc.h"

#include "exporter/config/decoder.h"

namespace podnet::config::kinds::grpc {

bool Built(Decoder& d, const YAML::Node& n, const std::string& path) {
#ifdef PODNET_WITH_GRPC
  return true;
#else
  d.Fail(n, path, "not supported by this build (built with -DPODNET_WITH_GRPC=OFF)");
  return false;
#endif
}

void Decode(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c) {
  const std::string base = "probes.grpc";
  if (!Built(d, n, base) ||
      !d.CheckMap(n, base, {"interval", "count", "spacing", "timeout", "port"})) {
    return;
  }
  GrpcOptions o;
  OptionalDurations(d, n, base,
                    {{"interval", &o.interval}, {"spacing", &o.spacing}, {"timeout", &o.timeout}});
  OptionalInteger(d, n, base, "count", 1, 1000, &o.count);
  OptionalInteger(d, n, base, "port", 1, 65535, &o.port);
  std::int64_t round_ns = 0;
  bool overflow = __builtin_mul_overflow(o.spacing.count(), std::int64_t{o.count - 1}, &round_ns) ||
                  __builtin_add_overflow(round_ns, o.timeout.count(), &round_ns);
  if (overflow || Duration(round_ns) > o.interval) {
    d.Fail(n, base,
           "a round lasts (count-1)*spacing + timeout, longer than interval " +
               FormatDuration(o.interval));
  }
  c.grpc = o;
}

}  // namespace podnet::config::kinds::grpc
