// probes.http: its section of the configuration (the keys: docs/configuration.md).
#include "exporter/config/kinds/http.h"

#include "exporter/config/decoder.h"

namespace podnet::config::kinds::http {

namespace {

// probes.http.modes: a non-empty list of keepalive, new_connection, each once.
void DecodeModes(Decoder& d, const YAML::Node& v, const std::string& base, HttpOptions& o) {
  if (!v.IsSequence() || v.size() == 0) {
    d.Fail(v, base + ".modes", "must be a non-empty list of keepalive, new_connection");
  } else {
    o.keepalive = o.new_connection = false;
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::string path = base + ".modes[" + std::to_string(i) + "]";
      auto s = d.String(v[i], path);
      if (!s) continue;
      bool* mode = *s == "keepalive"        ? &o.keepalive
                   : *s == "new_connection" ? &o.new_connection
                                            : nullptr;
      if (mode == nullptr) {
        d.Fail(v[i], path, "must be \"keepalive\" or \"new_connection\", got " + Quote(*s));
      } else if (*mode) {
        d.Fail(v[i], path, "duplicate mode " + Quote(*s));
      } else {
        *mode = true;
      }
    }
  }
}

}  // namespace

void Decode(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c) {
  const std::string base = "probes.http";
  if (!d.CheckMap(n, base,
                  {"interval", "duration", "qps", "connections", "modes", "timeout", "path",
                   "max_body_bytes"})) {
    return;
  }
  HttpOptions o;
  OptionalDurations(
      d, n, base, {{"interval", &o.interval}, {"duration", &o.duration}, {"timeout", &o.timeout}});
  OptionalInteger(d, n, base, "qps", 1, 10000, &o.qps);
  OptionalInteger(d, n, base, "connections", 1, 64, &o.connections);
  if (const YAML::Node v = n["modes"]; v.IsDefined()) DecodeModes(d, v, base, o);
  if (const YAML::Node v = n["path"]; v.IsDefined()) {
    if (auto s = d.String(v, base + ".path")) {
      if (s->empty() || s->front() != '/' || s->find_first_of(" \r\n\t") != std::string::npos) {
        d.Fail(v, base + ".path", "must be a request path starting with /, got " + Quote(*s));
      } else {
        o.path = *s;
      }
    }
  }
  if (const YAML::Node v = n["max_body_bytes"]; v.IsDefined()) {
    if (auto s = d.String(v, base + ".max_body_bytes")) {
      auto size = ParseSize(*s);
      if (!size || *size == 0 || *size > (std::uint64_t{64} << 20)) {
        d.Fail(v, base + ".max_body_bytes", "must be a size from 1 to 64MiB, got " + Quote(*s));
      } else {
        o.max_body_bytes = *size;
      }
    }
  }
  // A round (keep-alive connects, then each mode's run and its last request's timeout) must end
  // before the next one is due. Each term is at most ~1e18 ns only if small: check overflow.
  int modes = int{o.keepalive} + int{o.new_connection};
  std::int64_t round_ns = 0;
  bool overflow = __builtin_add_overflow(o.duration.count(), o.timeout.count(), &round_ns) ||
                  __builtin_mul_overflow(round_ns, std::int64_t{modes}, &round_ns) ||
                  __builtin_add_overflow(round_ns, o.keepalive ? o.timeout.count() : 0, &round_ns);
  if (overflow || Duration(round_ns) > o.interval) {
    d.Fail(n, base,
           "a round lasts modes*(duration + timeout) (+ timeout to open keep-alive "
           "connections)" +
               (overflow ? std::string() : " = " + FormatDuration(Duration(round_ns))) +
               ", longer than interval " + FormatDuration(o.interval));
  }
  c.http = o;
}

}  // namespace podnet::config::kinds::http
