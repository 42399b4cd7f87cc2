#include "exporter/probes/series_estimate.h"

#include <algorithm>
#include <set>
#include <utility>

#include "exporter/probes/registry.h"

namespace podnet::probes {

SeriesCounter::SeriesCounter(const config::Config& c, const SeriesShape& shape)
    : c_(c), shape_(shape) {
  std::set<std::pair<std::string, topology::PathClass>> groups;
  for (const auto& p : shape.peers) groups.emplace(p.zone, p.path);
  groups_ = groups.size();
  peers_ = c.aggregate_peers ? groups_ : shape.peers.size();
  histograms_ = (c.per_peer_histograms || c.native_histograms) && !c.aggregate_peers
                    ? shape.peers.size()
                    : groups_;
}

void SeriesCounter::AddHistograms(const std::string& name, std::size_t histograms,
                                  const std::vector<double>& buckets) {
  Add(name, histograms * (buckets.size() + 3),
      c_.native_histograms ? histograms : histograms * (buckets.size() + 3));
}

void SeriesCounter::Add(const std::string& name, std::size_t series, std::size_t stored) {
  if (c_.families_off.contains(name) || series == 0) return;
  estimate_.families.push_back({name, series, stored});
  estimate_.total += series;
  estimate_.native_total += stored;
}

SeriesEstimate SeriesCounter::Take() {
  std::sort(estimate_.families.begin(), estimate_.families.end(),
            [](const FamilySeries& a, const FamilySeries& b) { return a.name < b.name; });
  return std::move(estimate_);
}

SeriesEstimate EstimateSeries(const config::Config& c, const SeriesShape& shape) {
  SeriesCounter n(c, shape);
  // podnet_probe_{sent,received}_bytes_total: what each kind on says it adds of each.
  std::size_t bytes = 0;
  for (const auto& kind : ProbeKinds()) {
    if (kind.on(c)) bytes += kind.count_series(c, n);
  }
  // Not metrics.families switches: every Pod serves them.
  SeriesEstimate e = n.Take();
  e.families.push_back({"podnet_probe_received_bytes_total", bytes, bytes});
  e.families.push_back({"podnet_probe_sent_bytes_total", bytes, bytes});
  e.total += 2 * bytes;
  e.native_total += 2 * bytes;
  return e;
}

}  // namespace podnet::probes
