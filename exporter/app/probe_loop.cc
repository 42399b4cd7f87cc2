#include "exporter/app/probe_loop.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include "exporter/discovery/kubernetes/endpoint_peer.h"
#include "exporter/discovery/static_peers.h"
#include "exporter/topology/burst_pairs.h"
#include "exporter/topology/compose.h"
#include "exporter/topology/selection.h"

namespace podnet::app {

ProbeLoop::ProbeLoop(metrics::Metrics& metrics, ResponderHooks responders)
    : responders_(std::move(responders)),
      scheduler_metrics_(metrics.registry(), &metrics),
      probe_env_{io_, metrics, {}},
      scheduler_(io_, &scheduler_metrics_) {}

ProbeLoop::~ProbeLoop() { Join(); }  // nothing of the loop runs while its state goes

void ProbeLoop::PostStart(std::function<void(boost::asio::io_context&)> start) {
  boost::asio::post(io_, [this, start = std::move(start)] { start(io_); });
}

void ProbeLoop::Apply(std::shared_ptr<const config::Config> next) {
  boost::asio::post(io_, [this, next = std::move(next)] { Reconcile(next); });
}

void ProbeLoop::Discovered(discovery::kubernetes::Snapshot snapshot) {
  boost::asio::post(io_, [this, snapshot = std::move(snapshot)] {
    discovered_ = snapshot;
    Reconcile(applied_);
  });
}

void ProbeLoop::DiscoveryRestarted() {
  boost::asio::post(io_, [this] { discovered_ = {}; });
}

void ProbeLoop::DiscoveryOff() {
  boost::asio::post(io_, [this] {
    discovered_ = {};
    Reconcile(applied_);
  });
}

void ProbeLoop::DnsEndpoints(std::vector<discovery::kubernetes::Endpoint> endpoints) {
  boost::asio::post(io_, [this, endpoints = std::move(endpoints)] {
    dns_discovered_ = endpoints;
    UpdateDnsServers();
  });
}

void ProbeLoop::Reconcile(std::shared_ptr<const config::Config> next) {
  if (!next) return;
  // The effective self: the zone read from the Node fills an empty self.zone.
  topology::Self self = next->self;
  if (self.zone.empty() && next->kubernetes) self.zone = discovered_.self_zone;
  // Every discovered Pod, self included: the candidate peers, and those the coordinated
  // bursts choose among. Converted once per Reconcile (a relist of thousands of Pods).
  std::vector<topology::Peer> discovered = Discovered(self, *next);
  if (on_discovered_) on_discovered_(discovered);
  auto [peers, candidates, selected] = PeersFor(self, *next, discovered);
  const config::Config* prev = applied_.get();
  // Kubernetes discovery on or off changes how bursts run (coordinated or per peer): the kinds
  // restart as for a label change.
  bool labels_changed = prev == nullptr || self_ != self ||
                        prev->aggregate_peers != next->aggregate_peers ||
                        prev->per_peer_histograms != next->per_peer_histograms ||
                        prev->native_histograms != next->native_histograms ||
                        prev->families_off != next->families_off ||
                        prev->kubernetes.has_value() != next->kubernetes.has_value();
  if (next->kubernetes) {
    probe_env_.probe_pods = std::move(discovered);
    probe_env_.service_uid = discovered_.service_uid;
  } else {
    probe_env_.probe_pods.reset();
    probe_env_.service_uid.clear();
  }
  if (labels_changed) {
    RestartKinds(*next, self, peers);
  } else {
    UpdateKinds(prev, *next, peers);
  }
  // The responders answer with the effective identity: a zone read from the Node later (or a
  // reload that changes self) reaches them here, before any probe of this Reconcile runs a
  // round.
  if (prev == nullptr || self_ != self) responders_.identity(self);
  // Most Reconciles (a resync, a Pod's readiness elsewhere) leave the probe Pods as they were:
  // the responder loop rebuilds its tally and burst admission only on a change.
  if (auto pods = ProbePods(*next, self); pods != probe_pods_) {
    probe_pods_ = pods;
    responders_.probe_pods(std::move(pods));
  }
  probe_env_.metrics.SetPeers(peers);
  bool log = prev != next.get() || peers != peers_ || labels_changed;
  peers_ = std::move(peers);
  self_ = self;
  applied_ = std::move(next);
  UpdateDnsServers();  // max_servers, port or this Pod's zone may have changed
  if (log) LogProbing(candidates, selected);
}

std::vector<topology::Peer> ProbeLoop::Discovered(const topology::Self& self,
                                                  const config::Config& next) const {
  if (!next.kubernetes || !discovered_.synced) return {};
  return discovery::kubernetes::ProbePeersOf(self, discovered_.endpoints, next.kubernetes->port,
                                             next.kubernetes->burst_port);
}

std::vector<responders::KnownProber> ProbeLoop::ProbePods(const config::Config& next,
                                                          const topology::Self& self) const {
  std::vector<responders::KnownProber> out;
  auto add = [&](const boost::asio::ip::address& address, const std::string& node,
                 const std::string& zone) {
    out.push_back({address, zone,
                   std::string(topology::PathClassName(topology::Classify(self, node, zone)))});
  };
  // Discovered first: an address that is also a static peer keeps the node and zone the
  // EndpointSlice names (ProberTally keeps an address's first entry), not a static "unknown".
  if (next.kubernetes && discovered_.synced) {
    for (const auto& e : discovered_.endpoints) add(e.address, e.node, e.zone);
  }
  for (const auto& p : next.static_peers) add(p.address, p.node, p.zone);
  return out;
}

topology::Composition ProbeLoop::PeersFor(const topology::Self& self, const config::Config& next,
                                          std::vector<topology::Peer> discovered) const {
  topology::SelectionOptions selection;
  if (next.kubernetes) selection.peers_per_zone = next.kubernetes->peers_per_zone;
  return topology::ComposePeers(self, discovery::StaticPeers(self, next.static_peers),
                                std::move(discovered), selection);
}

void ProbeLoop::RestartKinds(const config::Config& next, const topology::Self& self,
                             const std::vector<topology::Peer>& peers) {
  // Every series carries source labels (and the peer labels aggregate_peers and
  // per_peer_histograms pick), and each family is served or not (metrics.families): all probes
  // restart under the new identity, label sets and families, removing their old series first.
  for (const auto& kind : probes::ProbeKinds()) scheduler_.SetKind(kind.name, nullptr, {});
  probe_env_.self = self;
  probe_env_.peer_labels =
      next.aggregate_peers ? metrics::PeerLabelSet::kAggregated : metrics::PeerLabelSet::kPerPeer;
  // Native histograms cost one series each where Prometheus ingests them: per peer, as counters.
  probe_env_.histogram_labels = next.per_peer_histograms || next.native_histograms
                                    ? metrics::PeerLabelSet::kPerPeer
                                    : metrics::PeerLabelSet::kAggregated;
  probe_env_.metrics.SetFamiliesOff(next.families_off);
  probe_env_.metrics.SetNativeHistograms(next.native_histograms);
  for (const auto& kind : probes::ProbeKinds()) {
    scheduler_.SetKind(kind.name, MakeKind(kind, next), peers);
  }
}

void ProbeLoop::UpdateKinds(const config::Config* prev, const config::Config& next,
                            const std::vector<topology::Peer>& peers) {
  auto diff = topology::Diff(peers_, peers);
  scheduler_.UpdatePeers(diff);
  if (prev != &next) {
    for (const auto& kind : probes::ProbeKinds()) {
      if (kind.changed(*prev, next)) scheduler_.SetKind(kind.name, MakeKind(kind, next), peers);
    }
  }
  if (!diff.added.empty() || !diff.removed.empty()) {
    spdlog::info("peers: {} added, {} removed, {} kept", diff.added.size(), diff.removed.size(),
                 diff.kept.size());
  }
}

void ProbeLoop::LogProbing(std::size_t candidates, std::size_t selected) const {
  std::string probes;
  for (const auto& kind : config::EnabledProbes(*applied_)) {
    probes += (probes.empty() ? "" : ", ") + kind;
  }
  std::string what = peers_.size() == 1 ? "1 peer" : std::to_string(peers_.size()) + " peers";
  if (applied_->kubernetes) {
    what += " (" + std::to_string(selected) + " selected of " + std::to_string(candidates) +
            " Kubernetes candidate" + (candidates == 1 ? "" : "s") + ")";
  }
  spdlog::info("probing {} with {}", what, probes.empty() ? "no probes" : probes);
}

void ProbeLoop::UpdateDnsServers() {
  std::vector<topology::Peer> servers;
  std::size_t found = 0;
  if (applied_ && applied_->kubernetes && applied_->dns && applied_->dns->cluster_dns) {
    const auto& cd = *applied_->dns->cluster_dns;
    for (const auto& e : dns_discovered_)
      servers.push_back(discovery::kubernetes::PeerOf(self_, e, cd.port));
    found = servers.size();
    servers =
        topology::SpreadOverZones(std::move(servers), static_cast<std::size_t>(cd.max_servers));
  }
  std::size_t over = found - servers.size();
  if (over > 0 && probe_env_.dns_servers_over_cap == 0) {
    spdlog::warn(
        "dns: {} cluster DNS endpoints, asking {} (probes.dns.cluster_dns.max_servers); the "
        "others are counted as servers_over_cap",
        found, servers.size());
  }
  if (servers != probe_env_.dns_servers) {
    spdlog::info("dns: asking {} cluster DNS endpoint{} directly", servers.size(),
                 servers.size() == 1 ? "" : "s");
  }
  probe_env_.dns_servers = std::move(servers);
  probe_env_.dns_servers_over_cap = over;
}

std::shared_ptr<probes::ProbeKind> ProbeLoop::MakeKind(const probes::ProbeKindEntry& entry,
                                                       const config::Config& c) {
  auto kind = entry.make(c, probe_env_);
  return kind && wrap_ ? wrap_(std::move(kind)) : kind;
}

}  // namespace podnet::app
