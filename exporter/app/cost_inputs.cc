#include "exporter/app/cost_inputs.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <utility>

#include "exporter/app/series_check.h"

namespace podnet::app {

report::CostConfig CostConfigOf(const config::Config& c) {
  auto seconds = [](config::Duration d) { return std::chrono::duration<double>(d).count(); };
  report::CostConfig out;
  if (c.rtt) {
    out.rtt = {c.rtt->protocol == config::kinds::rtt::RttProtocol::kUdp, seconds(c.rtt->interval),
               c.rtt->count, c.rtt->size};
  }
  if (c.http) {
    const auto& h = *c.http;
    out.http = {seconds(h.interval), seconds(h.duration), h.qps, h.connections,
                h.keepalive,         h.new_connection,    h.path};
  }
  if (c.grpc) out.grpc = {seconds(c.grpc->interval), c.grpc->count};
  if (c.mtu) out.mtu = {seconds(c.mtu->interval), c.mtu->max_size};
  if (c.dns) {
    out.dns = report::CostConfig::Dns{seconds(c.dns->interval),
                                      c.dns->names,
                                      {},
                                      c.dns->sample ? c.dns->sample->pods_per_zone : 0,
                                      c.dns->sample ? c.dns->sample->replica_pods_per_zone : 0};
    for (auto l : c.dns->resolvers)
      out.dns->resolvers.emplace_back(config::kinds::dns::LibcName(l));
  }
  if (c.burst) {
    const auto& b = *c.burst;
    out.burst = {seconds(b.interval),
                 static_cast<int>(b.streams.size()),
                 static_cast<double>(b.max_bytes_per_hour),
                 c.kubernetes.has_value(),
                 seconds(b.coordinated.period),
                 static_cast<double>(b.coordinated.max_bytes_per_burst)};
  }
  return out;
}

report::CostInputs CostInputsOf(const config::Config& c,
                                const std::vector<topology::Peer>* discovered,
                                double price_usd_per_gb) {
  report::CostInputs in;
  in.config = CostConfigOf(c);
  in.price_usd_per_gb = price_usd_per_gb;
  // The probe Pods: the discovered ones (a report Pod the Service does not select is not one of
  // them), else the static peers and this Pod. Zones: the distinct known ones, at least one.
  std::vector<std::pair<std::string, std::string>> pods;  // (node, zone)
  if (c.kubernetes && discovered) {
    for (const auto& p : *discovered) pods.emplace_back(p.node, p.zone);
    in.source = "Kubernetes discovery";
  } else {
    pods.emplace_back(c.self.node, c.self.zone);
    for (const auto& p : c.static_peers) pods.emplace_back(p.node, p.zone);
    in.source = c.kubernetes ? "Kubernetes discovery had not listed: static peers and this Pod"
                             : "static peers and this Pod";
  }
  std::set<std::string> zones;
  std::size_t node_bytes = 0, zone_bytes = 0;
  for (const auto& [node, zone] : pods) {
    if (!zone.empty()) zones.insert(zone);
    node_bytes += node.size();
    zone_bytes += zone.size();
  }
  in.pods = static_cast<int>(pods.size());
  in.zones = std::max<int>(1, static_cast<int>(zones.size()));
  // The /echo answers carry the peers' node and zone names: their mean length.
  in.node_name_bytes = pods.empty() ? 0 : node_bytes / pods.size();
  in.zone_name_bytes = pods.empty() ? 0 : zone_bytes / pods.size();
  // Series one probe Pod exports: --config.check's arithmetic (peers_per_zone x 3 zones with
  // Kubernetes discovery, whatever this cluster's zones).
  in.series_per_pod = SeriesPerPod(c);
  return in;
}

}  // namespace podnet::app
