// probes.mtu: its section of the configuration (the keys: docs/configuration.md).
#include "exporter/config/kinds/mtu.h"

#include "exporter/config/decoder.h"

namespace podnet::config::kinds::mtu {

void Decode(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c) {
  const std::string base = "probes.mtu";
  if (!d.CheckMap(n, base, {"interval", "timeout", "min_size", "max_size", "max_datagrams"})) {
    return;
  }
  MtuOptions o;
  OptionalDurations(d, n, base, {{"interval", &o.interval}, {"timeout", &o.timeout}});
  // 9028: the UDP echo responder answers payloads of at most 9,000 bytes (+ 28 of IPv4 and UDP).
  OptionalInteger(d, n, base, "min_size", 576, 9028, &o.min_size);
  OptionalInteger(d, n, base, "max_size", 576, 9028, &o.max_size);
  OptionalInteger(d, n, base, "max_datagrams", 2, 64, &o.max_datagrams);
  if (o.min_size >= o.max_size) {
    d.Fail(n, base,
           "min_size (" + std::to_string(o.min_size) + ") must be below max_size (" +
               std::to_string(o.max_size) + ")");
  }
  // A round: two directions of at most max_datagrams each, every one waiting up to timeout.
  std::int64_t round_ns = 0;
  bool overflow =
      __builtin_mul_overflow(o.timeout.count(), std::int64_t{2 * o.max_datagrams}, &round_ns);
  if (overflow || Duration(round_ns) > o.interval) {
    d.Fail(n, base,
           "a round lasts up to 2*max_datagrams*timeout" +
               (overflow ? std::string() : " = " + FormatDuration(Duration(round_ns))) +
               ", longer than interval " + FormatDuration(o.interval));
  }
  c.mtu = o;
}

}  // namespace podnet::config::kinds::mtu
