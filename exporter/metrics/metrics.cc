#include "exporter/metrics/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <sstream>

#include <prometheus/text_serializer.h>

#include "podnet/version.h"

namespace podnet::metrics {

prometheus::Labels PeerLabels(const config::Self& self, const topology::Peer& peer) {
  return {
      {"source_node", self.node},
      {"source_zone", self.zone},
      {"peer", peer.name},
      {"peer_node", peer.node},
      {"peer_zone", peer.zone},
      {"path", std::string(topology::PathClassName(peer.path))},
  };
}

void SeriesSet::RemoveAll() {
  for (auto& remove : removers_) remove();
  removers_.clear();
  added_.clear();
}

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::BuildGauge()
      .Name("podnet_build_info")
      .Help("A metric with a constant '1' value labelled by the version and revision of "
            "podnet-exporter.")
      .Register(*registry_)
      .Add({{"version", kVersion}, {"revision", kRevision}})
      .Set(1);
  reload_successful_ = &prometheus::BuildGauge()
                            .Name("podnet_config_last_reload_successful")
                            .Help("Whether the last configuration reload attempt was successful.")
                            .Register(*registry_)
                            .Add({});
  reload_success_timestamp_ =
      &prometheus::BuildGauge()
           .Name("podnet_config_last_reload_success_timestamp_seconds")
           .Help("Timestamp of the last successful configuration reload.")
           .Register(*registry_)
           .Add({});
  peers_ = &prometheus::BuildGauge()
                .Name("podnet_peers")
                .Help("Number of peers this probe Pod probes, by path class.")
                .Register(*registry_);
  for (auto p : topology::kAllPathClasses) {
    peers_->Add({{"path", std::string(topology::PathClassName(p))}});
  }
  probe_errors_ = &prometheus::BuildCounter()
                       .Name("podnet_probe_errors_total")
                       .Help("Probe failures, by probe kind and reason.")
                       .Register(*registry_);
  probe_sent_bytes_ = &prometheus::BuildCounter()
                           .Name("podnet_probe_sent_bytes_total")
                           .Help("Bytes the prober sent to a peer (IP headers included), by probe "
                                 "kind: the input of the cost model.")
                           .Register(*registry_);
  probe_received_bytes_ = &prometheus::BuildCounter()
                               .Name("podnet_probe_received_bytes_total")
                               .Help("Bytes the prober received from a peer (IP headers included), "
                                     "by probe kind.")
                               .Register(*registry_);
}

namespace {

// prometheus-cpp 1.0 writes doubles with precision 16, so a bucket bound whose nearest double
// is not within half a 16th digit of the decimal comes out long: 8e-05 (8.0000000000000007e-05)
// as le="8.000000000000001e-05", 6e-04 as le="0.0005999999999999999" - no double prints short
// there. `le` is part of the series identity, so rewrite each value as the shortest text that
// reads back to the same double (as client_golang writes it): rules and dashboards can name
// the bucket, and a library upgrade does not rename the bucket series.
std::string ShortenLeLabels(const std::string& text) {
  static constexpr std::string_view kLe = "le=\"";
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  for (std::size_t at = text.find(kLe); at != std::string::npos; at = text.find(kLe, at + 1)) {
    if (at == 0 || (text[at - 1] != '{' && text[at - 1] != ',')) continue;  // e.g. scale="
    std::size_t begin = at + kLe.size();
    std::size_t end = text.find('"', begin);
    if (end == std::string::npos) break;
    double v = 0;
    auto [ptr, ec] = std::from_chars(text.data() + begin, text.data() + end, v);
    if (ec != std::errc{} || ptr != text.data() + end || !std::isfinite(v)) continue;  // +Inf
    // The shortest digits, in the style the serializer chose (%g with precision 16: scientific
    // when the exponent is below -4 or at least 16), so that good values stay as they were.
    char buf[64];
    auto sci = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    if (sci.ec != std::errc{}) continue;
    const char* e = std::find(buf, sci.ptr, 'e');
    int exponent = 0;
    if (e == sci.ptr) continue;
    std::from_chars(e + (e[1] == '+' ? 2 : 1), sci.ptr, exponent);  // "e-05", "e+21"
    char* last = sci.ptr;
    if (exponent >= -4 && exponent < 16) {
      auto fixed = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
      if (fixed.ec != std::errc{}) continue;
      last = fixed.ptr;
    }
    out.append(text, pos, begin - pos);
    out.append(buf, last);
    pos = end;
  }
  out.append(text, pos, std::string::npos);
  return out;
}

}  // namespace

std::string Metrics::Serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return ShortenLeLabels(out.str());
}

void Metrics::SetPeers(const std::vector<topology::Peer>& peers) {
  std::map<topology::PathClass, int> counts;
  for (const auto& p : peers) ++counts[p.path];
  for (auto p : topology::kAllPathClasses) {
    peers_->Add({{"path", std::string(topology::PathClassName(p))}}).Set(counts[p]);
  }
}

void Metrics::SetReloadOutcome(bool ok, double now_seconds) {
  reload_successful_->Set(ok ? 1 : 0);
  if (ok) reload_success_timestamp_->Set(now_seconds);
}

}  // namespace podnet::metrics
