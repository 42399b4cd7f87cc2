// probes.rtt: its section of the configuration (the keys: docs/configuration.md).
#include "exporter/config/kinds/rtt.h"

#include "exporter/config/decoder.h"

namespace podnet::config::kinds::rtt {

const char* RttProtocolName(RttProtocol p) { return p == RttProtocol::kIcmp ? "icmp" : "udp"; }

void Decode(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c) {
  const std::string base = "probes.rtt";
  if (!d.CheckMap(n, base, {"protocol", "interval", "count", "spacing", "timeout", "size"})) return;
  RttOptions o;
  if (const YAML::Node v = n["protocol"]; v.IsDefined()) {
    if (auto s = d.String(v, base + ".protocol")) {
      if (*s == "icmp") {
        o.protocol = RttProtocol::kIcmp;
      } else if (*s == "udp") {
        o.protocol = RttProtocol::kUdp;
      } else {
        d.Fail(v, base + ".protocol", "must be \"icmp\" or \"udp\", got " + Quote(*s));
      }
    }
  }
  for (auto [key, out] : {std::pair<const char*, Duration*>{"interval", &o.interval},
                          std::pair<const char*, Duration*>{"spacing", &o.spacing},
                          std::pair<const char*, Duration*>{"timeout", &o.timeout}}) {
    if (const YAML::Node v = n[key]; v.IsDefined()) {
      if (auto dur = d.PositiveDuration(v, base + "." + key)) *out = *dur;
    }
  }
  if (const YAML::Node v = n["count"]; v.IsDefined()) {
    if (auto i = d.Integer(v, base + ".count", 1, 10000)) o.count = static_cast<int>(*i);
  }
  if (const YAML::Node v = n["size"]; v.IsDefined()) {
    if (auto i = d.Integer(v, base + ".size", 16, 9000)) o.size = static_cast<int>(*i);
  }
  // A train must end (last send + timeout) before the next one starts, or trains of one peer
  // would overlap and the loss of one would be charged to the other.
  // Checked arithmetic: 999 * 1y does not fit in 64-bit nanoseconds and must not wrap round
  // to a short (or negative) train that passes the check.
  std::int64_t train_ns = 0;
  bool overflow = __builtin_mul_overflow(o.spacing.count(), std::int64_t{o.count - 1}, &train_ns) ||
                  __builtin_add_overflow(train_ns, o.timeout.count(), &train_ns);
  if (overflow) {
    d.Fail(n, base,
           "a train lasts (count-1)*spacing + timeout, more than 292 years, longer than "
           "interval " +
               FormatDuration(o.interval));
  } else if (Duration train(train_ns); train > o.interval) {
    d.Fail(n, base,
           "a train lasts (count-1)*spacing + timeout = " + FormatDuration(train) +
               ", longer than interval " + FormatDuration(o.interval));
  }
  c.rtt = o;
}

}  // namespace podnet::config::kinds::rtt
