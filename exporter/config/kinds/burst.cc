// probes.burst: its section of the configuration (the keys: docs/configuration.md).
#include "exporter/config/kinds/burst.h"

#include <algorithm>

#include "exporter/config/decoder.h"

namespace podnet::config::kinds::burst {

namespace {

// probes.burst.coordinated; checked against o.interval, which Decode read first.
void DecodeCoordinated(Decoder& d, const YAML::Node& n, const std::string& burst, BurstOptions& o) {
  const std::string base = burst + ".coordinated";
  if (!d.CheckMap(n, base, {"period", "max_bytes_per_burst"})) return;
  if (const YAML::Node v = n["period"]; v.IsDefined()) {
    if (auto dur = d.PositiveDuration(v, base + ".period")) {
      if (*dur < o.interval) {
        // A Pod decides at its rounds: a period without one would never be probed.
        d.Fail(v, base + ".period",
               "must be at least " + burst + ".interval (" + FormatDuration(o.interval) +
                   "), got " + FormatDuration(*dur));
      } else {
        o.coordinated.period = *dur;
      }
    }
  }
  if (const YAML::Node v = n["max_bytes_per_burst"]; v.IsDefined()) {
    if (auto size = PositiveSize(d, v, base + ".max_bytes_per_burst")) {
      if (*size < 1'000'000) {
        d.Fail(v, base + ".max_bytes_per_burst",
               "must be at least 1MB (a smaller burst never leaves slow start), got " +
                   std::to_string(*size) + " bytes");
      } else {
        o.coordinated.max_bytes_per_burst = *size;
      }
    }
  }
}

}  // namespace

void Decode(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c) {
  const std::string base = "probes.burst";
  if (!d.CheckMap(
          n, base,
          {"interval", "duration", "streams", "max_bytes_per_hour", "timeout", "coordinated"})) {
    return;
  }
  BurstOptions o;
  for (auto [key, out] : {std::pair<const char*, Duration*>{"interval", &o.interval},
                          std::pair<const char*, Duration*>{"duration", &o.duration},
                          std::pair<const char*, Duration*>{"timeout", &o.step_timeout}}) {
    if (const YAML::Node v = n[key]; v.IsDefined()) {
      if (auto dur = d.PositiveDuration(v, base + "." + key)) *out = *dur;
    }
  }
  if (o.duration < std::chrono::milliseconds(100) || o.duration > std::chrono::seconds(60)) {
    d.Fail(n["duration"].IsDefined() ? n["duration"] : n, base + ".duration",
           "must be from 100ms to 60s, got " + FormatDuration(o.duration));
  }
  if (const YAML::Node v = n["streams"]; v.IsDefined()) {
    o.streams.clear();
    if (!v.IsSequence() || v.size() == 0) {
      d.Fail(v, base + ".streams", "must be a non-empty list of stream counts, e.g. [1, 8]");
    } else {
      for (std::size_t i = 0; i < v.size(); ++i) {
        std::string path = base + ".streams[" + std::to_string(i) + "]";
        if (auto k = d.Integer(v[i], path, 1, 128)) {
          if (std::find(o.streams.begin(), o.streams.end(), *k) != o.streams.end()) {
            d.Fail(v[i], path, "duplicate stream count " + std::to_string(*k));
          } else {
            o.streams.push_back(static_cast<int>(*k));
          }
        }
      }
    }
  }
  if (const YAML::Node v = n["max_bytes_per_hour"]; v.IsDefined()) {
    if (auto size = PositiveSize(d, v, base + ".max_bytes_per_hour")) o.max_bytes_per_hour = *size;
  }
  // The default period follows an interval longer than itself (each period needs a round).
  o.coordinated.period = std::max(o.coordinated.period, o.interval);
  if (const YAML::Node v = n["coordinated"]; v.IsDefined()) DecodeCoordinated(d, v, base, o);
  if (o.step_timeout > std::chrono::seconds(60)) {
    d.Fail(n["timeout"], base + ".timeout",
           "must be at most 60s, got " + FormatDuration(o.step_timeout));
    o.step_timeout = std::chrono::seconds(60);
  }
  // A round (one burst per stream count, each with up to ~4 control steps around it) must
  // end before the next round of the same peer is due.
  Duration round = (o.duration + 4 * o.step_timeout) * static_cast<int>(o.streams.size());
  if (round > o.interval) {
    d.Fail(n, base,
           "a round lasts up to (duration + 4*timeout) x len(streams) = " + FormatDuration(round) +
               ", longer than interval " + FormatDuration(o.interval));
  }
  c.burst = o;
}

}  // namespace podnet::config::kinds::burst
