#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "exporter/config/config.h"
#include "exporter/topology/topology.h"

namespace podnet::probes {

/// What a Pod's series depend on besides its configuration: whom it probes and which DNS
/// servers it asks.
struct SeriesShape {
  /// The peers this Pod probes (only zone and path class matter: they make the histogram
  /// groups).
  std::vector<topology::Peer> peers;
  /// resolv.conf's nameservers plus the cluster DNS replicas asked directly (dns probe).
  std::size_t dns_servers = 1;
  /// Zones of the cluster, for the coordinated bursts' zone pairs (with peers.kubernetes).
  std::size_t zones = 1;
};

/// One family's share of a Pod's series.
struct FamilySeries {
  std::string name;
  std::size_t series = 0;  // sample lines of the text exposition
  std::size_t stored = 0;  // series a Prometheus ingesting native histograms stores
};

/// A Pod's series, per family (those the configuration serves; sorted by name) and in all.
struct SeriesEstimate {
  std::vector<FamilySeries> families;
  std::size_t total = 0;
  /// With metrics.native_histograms, a histogram counts one series here (what a Prometheus with
  /// native histograms on stores from the protobuf exposition); otherwise equal to total.
  std::size_t native_total = 0;
};

/// Counts a Pod's series family by family: what each kind's CountSeries (its row in
/// probes/registry.cc) adds to, under the configuration's label and histogram settings.
class SeriesCounter {
 public:
  SeriesCounter(const config::Config& c, const SeriesShape& shape);

  const config::Config& config() const { return c_; }
  const SeriesShape& shape() const { return shape_; }
  /// Series per peer (per (zone, path class) group under aggregate_peers).
  std::size_t peers() const { return peers_; }
  /// (peer zone, path class) groups.
  std::size_t groups() const { return groups_; }
  /// Histograms towards peers: one per group unless per_peer_histograms or native_histograms.
  std::size_t histogram_groups() const { return histograms_; }

  /// `series` sample lines of family `name` (nothing when metrics.families turns it off).
  void Add(const std::string& name, std::size_t series) { Add(name, series, series); }
  /// `histograms` histograms of `buckets`: buckets + 3 lines each in text (+Inf, _sum, _count),
  /// one native series each where Prometheus ingests native histograms (native_histograms).
  void AddHistograms(const std::string& name, std::size_t histograms,
                     const std::vector<double>& buckets);
  void Add(const std::string& name, std::size_t series, std::size_t stored);

  /// The families added so far, sorted by name, and their totals.
  SeriesEstimate Take();

 private:
  const config::Config& c_;
  const SeriesShape& shape_;
  std::size_t groups_ = 0, peers_ = 0, histograms_ = 0;
  SeriesEstimate estimate_;
};

/// The series the probe kinds of `c` export from one Pod of `shape`, once every probe has run a
/// round and every answer was the healthy one (an error counter, a second HTTP status code or
/// DNS rcode add series; a peer that goes keeps none). Counts each sample line of the text
/// exposition: a histogram is its buckets + 3 (+Inf, _sum, _count). Honours aggregate_peers,
/// per_peer_histograms, native_histograms and metrics.families. Not counted: the families every Pod
/// has whatever its probes (build info, reload, podnet_peers, process_*, Kubernetes discovery,
/// responders): kBaseSeries estimates them. Formulas per kind: each kind's CountSeries; the lab
/// test lab_dashboards_rules checks the total against a real exporter's /metrics.
SeriesEstimate EstimateSeries(const config::Config& c, const SeriesShape& shape);

/// Series of a Pod outside the probe kinds' families, with Kubernetes discovery, every responder
/// and 5 probe kinds on: podnet_probe_round_start_delay_seconds (10 a kind), the responders'
/// request and drop counters (~46), discovery, process and build series (measured:
/// bench/cluster_cost.sh at the deploy default, 935 series in all of which 815 the probes').
inline constexpr std::size_t kBaseSeries = 120;
/// Of kBaseSeries, the start-delay histograms (5 kinds x 10 series); native (one series each)
/// under metrics.native_histograms.
inline constexpr std::size_t kBaseStartDelaySeries = 50;
inline constexpr std::size_t kBaseStartDelayHistograms = 5;

}  // namespace podnet::probes
