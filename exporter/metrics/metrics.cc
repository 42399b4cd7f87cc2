#include "exporter/metrics/metrics.h"

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

std::string Metrics::Serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
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
