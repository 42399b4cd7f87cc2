#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/config/config.h"
#include "exporter/metrics/metrics.h"
#include "exporter/topology/topology.h"

namespace podnet::probes {

namespace burst {
class PeriodLatch;  // burst/coordination.h
}

/// One probe kind towards one peer. Lives on the probe loop; every method is called there.
/// The kinds implement it through PeerProbeBase (peer_probe.h), which owns the round lifecycle.
class PeerProbe {
 public:
  virtual ~PeerProbe() = default;

  /// Starts one round (an RTT packet train, ...) that was due at `scheduled` (the round's
  /// intended start: its sends and deadlines are laid out from it, not from when the loop got
  /// round to it). Calls `done` exactly once when the round ends, whatever its outcome; failures
  /// are counted, never thrown. A round ends within the kind's own deadline (for RTT:
  /// (count-1)×spacing + timeout after `scheduled`).
  virtual void Run(std::chrono::steady_clock::time_point scheduled, std::function<void()> done) = 0;

  /// Ends a round in progress early (its `done` is still called) and stops any later work.
  virtual void Cancel() = 0;

  /// Removes this peer's series of this kind (ending a round in progress, as Cancel). After it
  /// the probe touches no metric again.
  virtual void RemoveSeries() = 0;
};

/// What a probe kind gets to work with.
struct ProbeEnv {
  boost::asio::io_context& io;  // the probe loop
  metrics::Metrics& metrics;
  topology::Self self;
  /// metrics.aggregate_peers; the app restarts every probe when it changes.
  metrics::PeerLabelSet peer_labels = metrics::PeerLabelSet::kPerPeer;
  /// The peer labels of latency histograms: kAggregated (per peer zone and path class) unless
  /// metrics.per_peer_histograms, whose default the app applies (histograms hold most of a
  /// Pod's series: ~57 a peer each at per-peer labels). kPerPeer here is for tests that read one
  /// peer's histogram; the app restarts every probe when it changes.
  metrics::PeerLabelSet histogram_labels = metrics::PeerLabelSet::kPerPeer;
  /// The cluster DNS replicas the dns probe asks directly, besides resolv.conf's nameservers
  /// (probes.dns.cluster_dns with peers.kubernetes): `name` the Pod, `address` and `port` where
  /// it answers, `node`, `zone` and `path` (from this Pod) as its EndpointSlice says. At most
  /// cluster_dns.max_servers; the app replaces it on every change, the probe reads it at each
  /// round's start.
  std::vector<topology::Peer> dns_servers = {};
  /// Discovered replicas left out by max_servers (each round counts servers_over_cap when > 0).
  std::size_t dns_servers_over_cap = 0;
  /// With peers.kubernetes: every discovered probe Pod, self included when listed (ready),
  /// classified from this Pod, with its burst_port — all candidates, not only the selected
  /// peers: the coordinated bursts (probes.burst.coordinated, over topology::BurstCandidates of
  /// it) and the DNS lookups' sample (probes.dns.sample) are drawn from it at each round's
  /// start; empty until discovery has listed. std::nullopt without Kubernetes discovery: bursts
  /// go to every peer, each at its own interval, and every Pod runs the DNS lookups. The app
  /// sets it from every discovery snapshot; turning discovery on or off restarts the kinds.
  std::optional<std::vector<topology::Peer>> probe_pods = std::nullopt;
  /// What keys those choices (topology::ChooseBurstPair, topology::InZoneSample): the peers'
  /// Service's UID from discovery (Snapshot::service_uid), "" without it. The app sets it with
  /// probe_pods.
  std::string service_uid = {};
  /// The coordinated bursts' per-period decisions, owned here (not by the kind) so that a
  /// reload, which rebuilds the kind, does not decide a period a second time. Set by the burst
  /// kind when null.
  std::shared_ptr<burst::PeriodLatch> burst_latch = nullptr;
  /// Wall-clock time, for the coordinated bursts' period number; system_clock::now when null
  /// (tests set it: time is a dependency).
  std::function<std::chrono::system_clock::time_point()> wall_clock = nullptr;

  /// The labels of `peer`'s series under this configuration (metrics::PeerLabels).
  prometheus::Labels PeerLabels(const topology::Peer& peer) const {
    return metrics::PeerLabels(self, peer, peer_labels);
  }
  /// The labels of `peer`'s latency histograms: PeerLabels under histogram_labels, never finer
  /// than peer_labels (metrics.aggregate_peers aggregates histograms too).
  prometheus::Labels HistogramLabels(const topology::Peer& peer) const {
    bool per_peer = peer_labels == metrics::PeerLabelSet::kPerPeer &&
                    histogram_labels == metrics::PeerLabelSet::kPerPeer;
    return metrics::PeerLabels(
        self, peer,
        per_peer ? metrics::PeerLabelSet::kPerPeer : metrics::PeerLabelSet::kAggregated);
  }
};

/// A probe kind set up for one configuration; it makes one PeerProbe per peer.
class ProbeKind {
 public:
  virtual ~ProbeKind() = default;
  virtual std::string_view name() const = 0;
  /// Time between the starts of two rounds towards one peer.
  virtual config::Duration interval() const = 0;
  virtual std::shared_ptr<PeerProbe> ForPeer(const topology::Peer& peer) = 0;

  /// Kinds whose targets are not peers (dns: one per name × form × resolver) name them here;
  /// the scheduler then runs ForTarget(key) for each key instead of ForPeer, and peer changes
  /// do not touch them. Empty (the default): one probe per peer.
  virtual std::vector<std::string> Targets() const { return {}; }
  virtual std::shared_ptr<PeerProbe> ForTarget(const std::string& key) { return nullptr; }

  /// Whether a round fills the path it measures (bursts: seconds at line rate), so that latency
  /// measured beside it would show its queues. The report's run holds such rounds until its
  /// latency phase ends (tests/lab/README.md: measure latency and throughput separately).
  virtual bool loads_path() const { return false; }
};

}  // namespace podnet::probes
