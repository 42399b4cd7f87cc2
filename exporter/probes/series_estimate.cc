#include "exporter/probes/series_estimate.h"

#include <algorithm>
#include <set>
#include <utility>

#include "exporter/metrics/buckets.h"

namespace podnet::probes {

namespace {

class Counter {
 public:
  Counter(const config::Config& c, const SeriesShape& shape) : c_(c) {
    std::set<std::pair<std::string, topology::PathClass>> groups;
    for (const auto& p : shape.peers) groups.emplace(p.zone, p.path);
    groups_ = groups.size();
    peers_ = c.aggregate_peers ? groups_ : shape.peers.size();
    histograms_ = (c.per_peer_histograms || c.native_histograms) && !c.aggregate_peers
                      ? shape.peers.size()
                      : groups_;
  }

  // Series per peer (per (zone, path class) group under aggregate_peers).
  std::size_t peers() const { return peers_; }
  // (peer zone, path class) groups.
  std::size_t groups() const { return groups_; }
  // Histograms towards peers: one per group unless per_peer_histograms or native_histograms.
  std::size_t histogram_groups() const { return histograms_; }

  void Add(const std::string& name, std::size_t series) { Add(name, series, series); }
  // `histograms` histograms of `buckets`: buckets + 3 lines each in text (+Inf, _sum, _count),
  // one native series each where Prometheus ingests native histograms (native_histograms).
  void AddHistograms(const std::string& name, std::size_t histograms,
                     const std::vector<double>& buckets) {
    Add(name, histograms * (buckets.size() + 3),
        c_.native_histograms ? histograms : histograms * (buckets.size() + 3));
  }
  void Add(const std::string& name, std::size_t series, std::size_t stored) {
    if (c_.families_off.contains(name) || series == 0) return;
    estimate_.families.push_back({name, series, stored});
    estimate_.total += series;
    estimate_.native_total += stored;
  }

  SeriesEstimate Take() {
    std::sort(estimate_.families.begin(), estimate_.families.end(),
              [](const FamilySeries& a, const FamilySeries& b) { return a.name < b.name; });
    return std::move(estimate_);
  }

 private:
  const config::Config& c_;
  std::size_t groups_ = 0, peers_ = 0, histograms_ = 0;
  SeriesEstimate estimate_;
};

// rtt: one protocol; the 5 packet counters at construction, the 2 round gauges after a round
// with a reply; timestamps {direction} x {source} without peer labels.
void Rtt(Counter& n) {
  n.AddHistograms("podnet_rtt_seconds", n.histogram_groups(), metrics::LatencyBuckets());
  for (const char* f : {"podnet_rtt_packets_sent_total", "podnet_rtt_packets_received_total",
                        "podnet_rtt_duplicate_replies_total", "podnet_rtt_reordered_replies_total",
                        "podnet_rtt_late_replies_total", "podnet_rtt_round_min_seconds",
                        "podnet_rtt_round_median_seconds"}) {
    n.Add(f, n.peers());
  }
  n.Add("podnet_rtt_timestamps_total", 4);
}

// http: per mode a request histogram (and TTFB), a requests counter for code 200 and a late
// counter; one connect histogram.
void Http(Counter& n, const http::HttpOptions& o) {
  std::size_t modes = (o.keepalive ? 1 : 0) + (o.new_connection ? 1 : 0);
  std::size_t h = n.histogram_groups();
  const auto& b = metrics::LatencyBuckets();
  n.AddHistograms("podnet_http_request_duration_seconds", modes * h, b);
  n.AddHistograms("podnet_http_time_to_first_byte_seconds", modes * h, b);
  n.AddHistograms("podnet_http_connect_duration_seconds", h, b);
  n.Add("podnet_http_requests_total", modes * n.peers());
  n.Add("podnet_http_late_requests_total", modes * n.peers());
}

void Grpc(Counter& n) {
  n.AddHistograms("podnet_grpc_request_duration_seconds", n.histogram_groups(),
                  metrics::LatencyBuckets());
  n.Add("podnet_grpc_requests_total", n.peers());  // code="OK"
}

// dns: one target per (name, form, resolver), 2 forms; responses by rcode: a relative name
// walks the search list (NXDOMAIN, then NOERROR), an absolute one is asked once.
void Dns(Counter& n, const dns::DnsOptions& o, std::size_t servers) {
  std::size_t per_form = o.names.size() * o.resolvers.size();
  std::size_t targets = 2 * per_form;
  n.AddHistograms("podnet_dns_lookup_duration_seconds", targets, metrics::DnsLatencyBuckets());
  n.Add("podnet_dns_lookups_total", targets);
  n.Add("podnet_dns_queries_per_lookup", targets);
  n.Add("podnet_dns_queries_total", 2 * targets);  // A and AAAA
  n.Add("podnet_dns_responses_total", 2 * per_form + per_form);
  if (!o.names.empty()) {
    n.AddHistograms("podnet_dns_server_rtt_seconds", servers, metrics::DnsLatencyBuckets());
    n.Add("podnet_dns_lookup_sampled", 1);
  }
}

// burst: per stream count, 4 last-value gauges and 3 counters for each peer it bursts to (with
// peers.kubernetes: each zone pair this Pod is chosen for, at most one per zone), and the path
// MTU once per peer.
void Burst(Counter& n, const config::Config& c, const burst::BurstOptions& o, std::size_t zones) {
  std::size_t targets = c.kubernetes ? zones : n.peers();
  std::size_t per_stream = targets * o.streams.size();
  for (const char* f :
       {"podnet_burst_throughput_bytes_per_second", "podnet_burst_tcp_rtt_seconds",
        "podnet_burst_snd_cwnd_bytes", "podnet_burst_interval_min_throughput_bytes_per_second",
        "podnet_burst_sent_bytes_total", "podnet_burst_retransmits_total",
        "podnet_burst_sender_cpu_seconds_total"}) {
    n.Add(f, per_stream);
  }
  n.Add("podnet_burst_path_mtu_bytes", targets);
  n.Add("podnet_burst_budget_remaining_bytes", 1);
  if (c.kubernetes) n.Add("podnet_burst_pairs_skipped_total", 2);
}

// service: per target, for each (backend zone, path class) it answered from — one here, a
// Service with backends in Z zones has Z — a latency histogram and a requests counter, and the
// target's own byte counters.
std::size_t Service(Counter& n, const service::ServiceOptions& o) {
  n.AddHistograms("podnet_service_rtt_seconds", o.targets.size(), metrics::LatencyBuckets());
  n.Add("podnet_service_requests_total", o.targets.size());
  return o.targets.size();
}

}  // namespace

SeriesEstimate EstimateSeries(const config::Config& c, const SeriesShape& shape) {
  Counter n(c, shape);
  // podnet_probe_{sent,received}_bytes_total: per (peer zone, path class) for each kind that
  // probes peers (PeerProbeBase::AddByteCounters), one {probe="dns"} for all DNS lookups.
  std::size_t bytes = 0;
  if (c.rtt) {
    Rtt(n);
    bytes += n.groups();
  }
  if (c.http) {
    Http(n, *c.http);
    bytes += n.groups();
  }
  if (c.grpc) {
    Grpc(n);
    bytes += n.groups();
  }
  if (c.burst) {
    Burst(n, c, *c.burst, shape.zones);
    bytes += c.kubernetes ? std::min(shape.zones, n.groups()) : n.peers();
  }
  if (c.dns) {
    Dns(n, *c.dns, shape.dns_servers);
    bytes += 1;
  }
  if (c.service) bytes += Service(n, *c.service);
  if (c.mtu) {
    // Per peer: both directions' size and black-hole gauges, the interface MTU; the ICMP gauge
    // only once an error named an MTU (a path that needs it), so not counted here.
    n.Add("podnet_path_mtu_bytes", 2 * n.peers());
    n.Add("podnet_path_mtu_black_hole", 2 * n.peers());
    n.Add("podnet_path_mtu_interface_bytes", n.peers());
    bytes += n.groups();
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
