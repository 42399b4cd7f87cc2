// Build() (report.h): each section's rows, notes and failures from the collected families.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "exporter/report/report.h"
#include "exporter/report/series.h"
#include "exporter/report/table.h"

namespace podnet::report {
namespace {

Figure Fig(double value, double spread) {
  Figure f;
  f.value = value;
  f.spread = spread;
  return f;
}

// The width of the bucket of `b` that holds `x` (seconds): what the histogram resolves there.
double BucketWidthAt(double x, const Buckets& b) {
  double lower = 0;
  for (const auto& [bound, n] : b.cumulative) {
    if (x <= bound) return std::isinf(bound) ? 0 : bound - lower;
    lower = bound;
  }
  return 0;
}

// Latency figures of one row: p50/p90/p99 interpolated in buckets, the max bucket bound, and
// their spreads (docs/design.md, "One-shot report"): p90 − p50 for p50 and p90, p99 − p50 for
// p99 — how far the samples of this very run lie apart — and never less than the width of the
// figure's bucket (a smaller change is below what the histogram resolves).
void AddLatency(Row& row, const Buckets& b) {
  double p50 = BucketQuantile(0.5, b), p90 = BucketQuantile(0.9, b), p99 = BucketQuantile(0.99, b);
  double body = p90 - p50, tail = p99 - p50, max = BucketMaxBound(b);
  auto at = [&](double x, double spread) { return Fig(x, std::max(spread, BucketWidthAt(x, b))); };
  row.figures["p50_seconds"] = at(p50, body);
  row.figures["p90_seconds"] = at(p90, body);
  row.figures["p99_seconds"] = at(p99, tail);
  // The max is one sample's bucket (the slowest of the run): no spread can be read from one
  // sample, so it is shown, never marked (two lab runs of one network moved it by 50-1400 %).
  row.figures["max_seconds"] = Fig(max, kInf);
  row.figures["samples"] = Fig(b.count, std::sqrt(b.count));
  // A percentile the samples cannot carry is left out; its spread (the others' too) stays as
  // computed, the bucket still bounds it.
  for (auto [name, q] : kPercentiles) {
    if (b.count < MinSamplesFor(q)) row.figures[name].value = kNaN;
  }
}

// A count's spread: Poisson's standard deviation, at least one.
Figure Count(double n) { return Fig(n, std::max(1.0, std::sqrt(n))); }

std::vector<std::pair<std::string, std::string>> KeyOf(const std::vector<std::string>& names,
                                                       const Key& values) {
  std::vector<std::pair<std::string, std::string>> key;
  for (std::size_t i = 0; i < names.size(); ++i) key.emplace_back(names[i], values[i]);
  return key;
}

bool Configured(const RunInfo& run, const std::string& kind) {
  return std::find(run.configured.begin(), run.configured.end(), kind) != run.configured.end();
}

// Marks section `s` configured when probe kind `kind` is on in the run; else empties it, with
// a note saying so. Returns whether it is configured.
bool ConfigureAs(Section& s, const RunInfo& run, const std::string& kind) {
  s.configured = Configured(run, kind);
  if (!s.configured) {
    s.rows.clear();
    s.notes = {"not configured (probes." + kind + " is absent from the configuration)"};
  }
  return s.configured;
}

// The target a per-peer series names: its peer, or its path class when peers are aggregated
// away.
std::string TargetOf(const Key& k) { return k[0].empty() ? "path_class=" + k[1] : k[0]; }

// Appends "reason ×n" to a comma-separated list of error counts ("timeout ×3, refused ×1").
void AppendErrorCount(std::string& line, const std::string& reason, double n) {
  line += (line.empty() ? "" : ", ") + reason + " ×" + std::to_string(static_cast<long>(n));
}

// "peer cross: timeout ×3, refused ×1" lines from podnet_probe_errors_total{probe=kind}.
void AddErrorNotes(Section& s, const std::vector<prometheus::MetricFamily>& fams) {
  auto errors = SumBy(fams, "podnet_probe_errors_total", {"peer", "path_class", "name", "reason"},
                      {{"probe", s.id}});
  std::map<std::string, std::string> by_target;
  for (const auto& [k, n] : errors) {
    if (n <= 0) continue;
    std::string target = !k[2].empty() ? k[2] : TargetOf(k);
    AppendErrorCount(by_target[target], k[3], n);
  }
  for (const auto& [t, line] : by_target) s.notes.push_back("errors of " + t + ": " + line);
}

// One row per group of the RTT samples by `by`: peers, packets sent, loss and latency.
void AddRttRows(Section& s, const std::vector<prometheus::MetricFamily>& f,
                const std::vector<std::string>& by) {
  auto hist = HistBy(f, "podnet_rtt_seconds", by);
  auto sent = SumBy(f, "podnet_rtt_packets_sent_total", by);
  auto recv = SumBy(f, "podnet_rtt_packets_received_total", by);
  auto peers = DistinctBy(f, "podnet_rtt_packets_sent_total", by, "peer");
  for (const auto& [k, n] : sent) {
    Row row{KeyOf(by, k), {}};
    row.figures["peers"] = Fig(static_cast<double>(peers[k].size()), 0);
    row.figures["packets_sent"] = Count(n);
    double r = recv.count(k) ? recv[k] : 0;
    double loss = n > 0 ? (n - r) / n : kNaN;
    // One packet's worth, or the binomial standard error when larger.
    double loss_spread = n > 0 ? std::max(1 / n, std::sqrt(loss * (1 - loss) / n)) : 0;
    row.figures["loss_ratio"] = Fig(loss, loss_spread);
    AddLatency(row, hist[k]);
    s.rows.push_back(std::move(row));
  }
}

Section RttSection(const std::vector<prometheus::MetricFamily>& f, std::vector<Failure>& fail) {
  Section s{"rtt", "RTT by path class", false, {}, {}};
  AddRttRows(s, f, {"path_class", "protocol"});
  auto sent_peer = SumBy(f, "podnet_rtt_packets_sent_total", {"peer", "path_class"});
  auto recv_peer = SumBy(f, "podnet_rtt_packets_received_total", {"peer", "path_class"});
  for (const auto& [k, n] : sent_peer) {
    double r = recv_peer.count(k) ? recv_peer[k] : 0;
    if (n > 0 && r == 0) {
      fail.push_back({"rtt", TargetOf(k),
                      "100% loss (" + std::to_string(static_cast<long>(n)) + " packets sent)"});
    }
  }
  s.notes.push_back(
      "p50/p90/p99 are interpolated inside podnet_rtt_seconds' buckets, as PromQL's "
      "histogram_quantile does (adjacent bounds at most 50 % apart); max is the upper bound "
      "of the highest bucket with a sample. Loss counts replies that never came within the "
      "timeout.");
  return s;
}

// RTT by zone pair (the zone matrix): the RTT section's figures by source_zone and peer_zone.
// Its failures are the RTT section's.
Section ZonesSection(const std::vector<prometheus::MetricFamily>& f) {
  Section s{"zones", "RTT by zone pair", false, {}, {}};
  AddRttRows(s, f, {"source_zone", "peer_zone"});
  s.notes.push_back(
      "The RTT section's samples grouped by this Pod's zone (source_zone) and the peer's "
      "(peer_zone) instead of by path class; an empty zone is one Kubernetes did not label.");
  return s;
}

// HTTP and gRPC: requests, those not answered `ok_code`, latency; a peer with requests and no
// `ok_code` answer failed.
struct RequestKind {
  const char* id;
  const char* title;
  const char* duration;         // histogram family
  const char* requests;         // counter family with a `code` label
  std::vector<std::string> by;  // path_class first
  const char* ok_code;          // "200", "OK"
  const char* unit;             // "requests", "checks"
  const char* note;
};

Section RequestSection(const RequestKind& kind, const std::vector<prometheus::MetricFamily>& f,
                       std::vector<Failure>& fail) {
  Section s{kind.id, kind.title, false, {}, {kind.note}};
  auto hist = HistBy(f, kind.duration, kind.by);
  auto all = SumBy(f, kind.requests, kind.by);
  auto ok = SumBy(f, kind.requests, kind.by, {{"code", kind.ok_code}});
  for (const auto& [k, n] : all) {
    Row row{KeyOf(kind.by, k), {}};
    row.figures["requests"] = Count(n);
    row.figures["failed_requests"] = Count(n - ok[k]);
    AddLatency(row, hist[k]);
    s.rows.push_back(std::move(row));
  }
  std::vector<std::string> by_peer{"peer"};
  by_peer.insert(by_peer.end(), kind.by.begin(), kind.by.end());
  auto all_peer = SumBy(f, kind.requests, by_peer);
  auto ok_peer = SumBy(f, kind.requests, by_peer, {{"code", kind.ok_code}});
  for (const auto& [k, n] : all_peer) {
    if (n <= 0 || ok_peer[k] > 0) continue;
    std::string what;
    for (std::size_t i = 2; i < k.size(); ++i) what += k[i] + ", ";
    fail.push_back({kind.id, TargetOf(k),
                    std::string("no ") + kind.ok_code + " answer (" + what +
                        std::to_string(static_cast<long>(n)) + " " + kind.unit + ")"});
  }
  return s;
}

Section HttpSection(const std::vector<prometheus::MetricFamily>& f, std::vector<Failure>& fail) {
  return RequestSection(
      {"http",
       "HTTP /echo: keep-alive vs new connection",
       "podnet_http_request_duration_seconds",
       "podnet_http_requests_total",
       {"path_class", "connection"},
       "200",
       "requests",
       "Request duration from the request's first byte sent to the response's last byte "
       "(new includes the TCP handshake); percentiles interpolated in "
       "podnet_http_request_duration_seconds' buckets (histogram_quantile)."},
      f, fail);
}

Section GrpcSection(const std::vector<prometheus::MetricFamily>& f, std::vector<Failure>& fail) {
  return RequestSection({"grpc",
                         "gRPC health checks",
                         "podnet_grpc_request_duration_seconds",
                         "podnet_grpc_requests_total",
                         {"path_class"},
                         "OK",
                         "checks",
                         "grpc.health.v1.Health/Check round trips; percentiles interpolated in "
                         "buckets (histogram_quantile)."},
                        f, fail);
}

Section BurstSection(const std::vector<prometheus::MetricFamily>& f, std::vector<Failure>& fail) {
  Section s{"burst", "TCP bursts: 1 and N streams", false, {}, {}};
  std::vector<std::string> by{"path_class", "streams"};
  auto tput = SumBy(f, "podnet_burst_throughput_bytes_per_second", by);
  auto tput_min = SumBy(f, "podnet_burst_interval_min_throughput_bytes_per_second", by);
  auto n = DistinctBy(f, "podnet_burst_throughput_bytes_per_second", by, "peer");
  auto retrans = SumBy(f, "podnet_burst_retransmits_total", by);
  auto sent = SumBy(f, "podnet_burst_sent_bytes_total", by);
  auto rtt = SumBy(f, "podnet_burst_tcp_rtt_seconds", by);
  for (const auto& [k, bps] : tput) {
    double peers = std::max<double>(1, n[k].size());
    Row row{KeyOf(by, k), {}};
    double mean = bps / peers, mean_min = tput_min[k] / peers;
    // Spread: how far the burst's slowest measurement interval fell below its mean.
    double spread = std::max(0.0, mean - mean_min);
    row.figures["throughput_bits_per_second"] = Fig(8 * mean, 8 * spread);
    // One burst's retransmits come in storms (two lab runs of one network: 461 and 19,423 on
    // the same path): one burst gives no spread for them, as for its TCP RTT: shown, never
    // marked.
    row.figures["retransmits"] = Fig(retrans[k], kInf);
    // Bytes follow throughput over a fixed duration: the same relative spread.
    row.figures["sent_bytes"] = Fig(sent[k], mean > 0 ? sent[k] * spread / mean : 0);
    // One burst gives no spread for its smoothed RTT (it swings with the queue it built): shown,
    // never marked.
    row.figures["tcp_rtt_seconds"] = Fig(rtt[k] / peers, kInf);
    s.rows.push_back(std::move(row));
  }
  auto tput_peer = SumBy(f, "podnet_burst_throughput_bytes_per_second", {"peer", "path_class"});
  for (const auto& [k, bps] : tput_peer) {
    if (bps <= 0) fail.push_back({"burst", TargetOf(k), "no throughput measured"});
  }
  // A peer none of whose bursts completed has no throughput series at all, only errors: that
  // is a failure too. A burst skipped for the byte budget (budget_exhausted) is the
  // configuration's choice, not the peer's failure; it stays a note.
  std::map<Key, std::string> no_burst;
  auto errors =
      SumBy(f, "podnet_probe_errors_total", {"peer", "path_class", "reason"}, {{"probe", "burst"}});
  for (const auto& [k, n] : errors) {
    Key peer{k[0], k[1]};
    if (n <= 0 || k[2] == "budget_exhausted" || tput_peer.count(peer)) continue;
    AppendErrorCount(no_burst[peer], k[2], n);
  }
  for (const auto& [k, line] : no_burst) {
    fail.push_back({"burst", TargetOf(k), "no burst completed (" + line + ")"});
  }
  s.notes.push_back(
      "Throughput of the last burst per peer (mean over the path's peers), as "
      "podnet_burst_throughput_bytes_per_second; retransmits and the smoothed TCP RTT from the "
      "kernel's TCP_INFO; bursts are charged to probes.burst.max_bytes_per_hour.");
  return s;
}

// Path MTU per path class and direction (probes.mtu): over the class's peers, the smallest and
// largest size that crossed, the interface MTU, and how many peers' paths are black holes. A
// path MTU is deterministic for one network (its spread is 0: any change is a change); peers
// with a black hole are named in a note, peers nothing reached (not even the protocol's smallest
// size) are failures.
Section MtuSection(const std::vector<prometheus::MetricFamily>& f, std::vector<Failure>& fail) {
  Section s{"mtu", "Path MTU", false, {}, {}};
  std::vector<std::string> by{"path_class", "direction", "peer"};
  auto size = SumBy(f, "podnet_path_mtu_bytes", by);
  auto hole = SumBy(f, "podnet_path_mtu_black_hole", by);
  auto iface = SumBy(f, "podnet_path_mtu_interface_bytes", {"path_class", "peer"});
  struct Acc {
    double peers = 0, min = kInf, max = 0, holes = 0, iface = kInf;
  };
  std::map<Key, Acc> rows;
  std::map<std::string, std::string> holes;  // peer → directions
  for (const auto& [k, bytes] : size) {
    Acc& a = rows[{k[0], k[1]}];
    a.peers += 1;
    a.min = std::min(a.min, bytes);
    a.max = std::max(a.max, bytes);
    if (auto it = iface.find({k[0], k[2]}); it != iface.end())
      a.iface = std::min(a.iface, it->second);
    if (hole[k] > 0) {
      a.holes += 1;
      holes[TargetOf({k[2], k[0]})] += (holes[TargetOf({k[2], k[0]})].empty() ? "" : ", ") + k[1];
    }
    if (k[1] == "forward" && bytes <= 0) {
      fail.push_back({"mtu", TargetOf({k[2], k[0]}),
                      "nothing crossed, not even the protocol's smallest size"});
    }
  }
  for (const auto& [k, a] : rows) {
    Row row{KeyOf({"path_class", "direction"}, k), {}};
    row.figures["peers"] = Fig(a.peers, 0);
    row.figures["path_mtu_min_bytes"] = Fig(a.min, 0);
    row.figures["path_mtu_max_bytes"] = Fig(a.max, 0);
    row.figures["interface_mtu_bytes"] = Fig(std::isinf(a.iface) ? kNaN : a.iface, 0);
    row.figures["black_hole_peers"] = Fig(a.holes, 0);
    s.rows.push_back(std::move(row));
  }
  for (const auto& [peer, directions] : holes) {
    s.notes.push_back("black hole towards " + peer + " (" + directions +
                      "): larger packets lost with no ICMP error; TCP through it stalls");
  }
  s.notes.push_back(
      "Largest IP packet (headers included) that crossed each direction in the last round, over "
      "the path class's peers, as podnet_path_mtu_bytes; interface: the smallest MTU of the "
      "interfaces this Pod sends through; black hole: as podnet_path_mtu_black_hole; reverse: "
      "asked only up to the forward answer (no reply is larger than its request), so equal to "
      "it means at least that (docs/probes.md, \"Path MTU\").");
  return s;
}

Section DnsSection(const std::vector<prometheus::MetricFamily>& f, std::vector<Failure>& fail) {
  Section s{"dns", "DNS: questions per lookup", false, {}, {}};
  std::vector<std::string> by{"name", "form", "resolver"};
  auto lookups = SumBy(f, "podnet_dns_lookups_total", by);
  auto queries = SumBy(f, "podnet_dns_queries_total", by);
  auto nx = SumBy(f, "podnet_dns_responses_total", by, {{"rcode", "NXDOMAIN"}});
  auto results = SumBy(f, "podnet_dns_lookups_total", {"name", "form", "resolver", "result"});
  auto hist = HistBy(f, "podnet_dns_lookup_duration_seconds", by);
  for (const auto& [k, n] : lookups) {
    Row row{KeyOf(by, k), {}};
    row.figures["lookups"] = Fig(n, 0);
    // The walk is deterministic for one resolv.conf: any change is a change.
    row.figures["queries_per_lookup"] = Fig(n > 0 ? queries[k] / n : kNaN, 0);
    row.figures["nxdomain_per_lookup"] = Fig(n > 0 ? nx[k] / n : kNaN, 0);
    double failed = 0;
    for (const char* r : {"timeout", "error", "servfail"}) {
      auto it = results.find({k[0], k[1], k[2], r});
      if (it != results.end()) failed += it->second;
    }
    row.figures["failed_lookups"] = Count(failed);
    AddLatency(row, hist[k]);
    row.figures.erase("p99_seconds");
    s.rows.push_back(std::move(row));
    if (n > 0 && failed == n) {
      fail.push_back({"dns", k[0] + " (" + k[1] + ", " + k[2] + ")",
                      "every lookup failed (timeout, error or SERVFAIL)"});
    }
  }
  s.notes.push_back(
      "Questions one lookup sent (search list × A/AAAA, as the C library would under the "
      "resolv.conf), NXDOMAIN answers per lookup, and lookup latency interpolated in "
      "podnet_dns_lookup_duration_seconds' buckets.");
  return s;
}

Section CostSection(const std::vector<prometheus::MetricFamily>& f, const RunInfo& run) {
  Section s{"cost", "Cross-zone bytes and cost", true, {}, {}};
  auto sent = SumBy(f, "podnet_probe_sent_bytes_total", {"path_class", "probe"});
  auto recv = SumBy(f, "podnet_probe_received_bytes_total", {"path_class", "probe"});
  std::map<std::pair<std::string, std::string>, int> rounds;  // (path class, kind) → rounds
  for (const auto& t : run.targets) rounds[{t.path_class, t.probe}] += t.rounds;
  struct PathBytes {
    double run = 0;        // bytes moved in the run
    double daemon = 0;     // bytes an hour at the configured intervals
    double one_round = 0;  // the heaviest kind's bytes per round: the spread of `run`
  };
  std::map<std::string, PathBytes> by_path;
  std::map<Key, double> both = sent;
  for (const auto& [k, bytes] : recv) both[k] += bytes;
  for (const auto& [k, bytes] : both) {
    if (k[0].empty()) continue;  // not a peer's (dns)
    auto& acc = by_path[k[0]];
    acc.run += bytes;
    int r = rounds[{k[0], k[1]}];
    if (r <= 0) continue;
    acc.one_round = std::max(acc.one_round, bytes / r);
    auto it = run.interval_seconds.find(k[1]);
    if (it != run.interval_seconds.end() && it->second > 0) {
      acc.daemon += bytes / r * 3600 / it->second;
    }
  }
  for (const auto& [path, acc] : by_path) {
    Row row{{{"path_class", path}}, {}};
    double price = path == "cross_zone" ? run.price_usd_per_gb : 0;
    // Spread: one round of the kind that moves the most, more or less (rounds start at random
    // phases); the projection varies as much, relatively.
    double rel = acc.run > 0 ? acc.one_round / acc.run : 0;
    double usd = acc.daemon * 24 * 30 / 1e9 * price;
    row.figures["run_bytes"] = Fig(acc.run, acc.one_round);
    row.figures["daemon_bytes_per_hour"] = Fig(acc.daemon, acc.daemon * rel);
    row.figures["daemon_usd_per_30_days"] = Fig(usd, usd * rel);
    s.rows.push_back(std::move(row));
  }
  char price[64];
  std::snprintf(price, sizeof price, "%g", run.price_usd_per_gb);
  s.notes.push_back(
      "Bytes the probes moved (sent + received, IP headers included: "
      "podnet_probe_{sent,received}_bytes_total). run_bytes: in this run; daemon: per Pod "
      "towards these peers at the configured intervals (bytes per round × rounds per hour). "
      "Cost at $" +
      std::string(price) +
      " per GB (10^9 bytes) crossing a zone, both ends billed, as the recording rule "
      "podnet:config:cross_zone_usd_per_gb; 30 days = 720 h as the Throughput and cost "
      "dashboard.");
  return s;
}

// The configuration's cost for the cluster (cost.h): one row per kind and path class, then the
// totals by class (probe "all") and over every class ("all", "all") with N, Z and, when known,
// the series per Pod. Computed, not measured: spread 0, so any change is a change. Peers by kind
// and class: the run's targets; DNS questions per lookup: the DNS section's.
// The DNS section's questions per lookup by (name, form, resolver): only walks every lookup of
// which was answered (a refused or timed-out one stops early).
QuestionsPerLookup AnsweredWalks(const Section& dns) {
  QuestionsPerLookup questions;
  for (const auto& row : dns.rows) {
    auto it = row.figures.find("queries_per_lookup");
    auto failed = row.figures.find("failed_lookups");
    if (row.key.size() != 3 || it == row.figures.end() || !std::isfinite(it->second.value) ||
        failed == row.figures.end() || failed->second.value > 0) {
      continue;
    }
    questions[{row.key[0].second, row.key[1].second, row.key[2].second}] = it->second.value;
  }
  return questions;
}

Section ClusterCostSection(const RunInfo& run, const Section& dns) {
  const CostInputs& in = *run.cluster_cost;
  Section s{
      "cluster_cost", "Cluster-wide probe traffic and cost (from the configuration)", true, {}, {}};
  PeersByClass peers;
  for (const auto& t : run.targets) {
    if (!t.path_class.empty()) ++peers[t.probe][t.path_class];
  }
  ClusterCost cost = ComputeClusterCost(in, peers, AnsweredWalks(dns));
  Row total{{{"probe", "all"}, {"path_class", "all"}}, {}};
  double pod = 0, month = 0;
  for (const auto& l : cost.lines) {
    Row row{{{"probe", l.probe}, {"path_class", l.path_class}}, {}};
    if (l.peers) row.figures["peers"] = Fig(*l.peers, 0);
    row.figures["pod_bytes_per_hour"] = Fig(l.pod_bytes_per_hour, 0);
    row.figures["cluster_bytes_per_month"] = Fig(l.cluster_bytes_per_month, 0);
    row.figures["cluster_usd_per_month"] = Fig(l.cluster_usd_per_month, 0);
    if (l.probe == "all") {
      pod += l.pod_bytes_per_hour;
      month += l.cluster_bytes_per_month;
    }
    s.rows.push_back(std::move(row));
  }
  total.figures["pods"] = Fig(in.pods, 0);
  total.figures["zones"] = Fig(in.zones, 0);
  if (in.series_per_pod) {
    total.figures["series_per_pod"] = Fig(static_cast<double>(*in.series_per_pod), 0);
  }
  total.figures["pod_bytes_per_hour"] = Fig(pod, 0);
  total.figures["cluster_bytes_per_month"] = Fig(month, 0);
  total.figures["cluster_usd_per_month"] = Fig(cost.cross_zone_usd_per_month, 0);
  s.rows.push_back(std::move(total));
  char line[512];
  std::snprintf(line, sizeof line,
                "Cluster: %d probe Pods in %d zones (%s). Cross-zone probe traffic of the whole "
                "cluster: %.1f GB a month, $%.2f at $%g per GB crossing a zone (either direction; "
                "both ends' charges together, --price-per-gb, as the recording rule "
                "podnet:config:cross_zone_usd_per_gb); a month is %g h.",
                in.pods, in.zones, in.source.c_str(), cost.cross_zone_bytes_per_month / 1e9,
                cost.cross_zone_usd_per_month, in.price_usd_per_gb, kHoursPerMonth);
  s.notes.push_back(line);
  if (in.series_per_pod) {
    s.notes.push_back(
        "Series per Pod: " + std::to_string(*in.series_per_pod) + " (cluster: " +
        std::to_string(*in.series_per_pod * static_cast<std::size_t>(std::max(0, in.pods))) + ").");
  }
  for (const auto& a : cost.arithmetic) s.notes.push_back(a + ".");
  s.notes.push_back(
      "Computed from the configuration (exporter/report/cost.h: IP packets' bytes, both "
      "directions, every request answered), not measured: the \"cost\" section above is what "
      "this run's counters saw. Per Pod: this Pod's peers by class; the cluster: N Pods like it.");
  return s;
}

}  // namespace

int MinSamplesFor(double q) {
  int n = 1;
  while (n < 100000 && 1 - std::pow(q, n) - std::pow(1 - q, n) < 0.95) ++n;
  return n;
}

Report Build(const std::vector<prometheus::MetricFamily>& families, RunInfo run) {
  Report r;
  r.run = std::move(run);
  std::vector<Failure> fails;
  r.sections = {RttSection(families, fails),  HttpSection(families, fails),
                GrpcSection(families, fails), BurstSection(families, fails),
                DnsSection(families, fails),  CostSection(families, r.run)};
  for (auto& s : r.sections) {
    if (s.id != "cost" && ConfigureAs(s, r.run, s.id)) AddErrorNotes(s, families);
  }
  // After the DNS section's rows are final: its questions per lookup feed the arithmetic.
  if (r.run.cluster_cost) r.sections.push_back(ClusterCostSection(r.run, r.sections[4]));
  Section zones = ZonesSection(families);
  ConfigureAs(zones, r.run, "rtt");
  r.sections.push_back(std::move(zones));
  Section mtu = MtuSection(families, fails);
  if (ConfigureAs(mtu, r.run, "mtu")) AddErrorNotes(mtu, families);
  r.sections.push_back(std::move(mtu));
  for (const auto& f : fails) {
    if (Configured(r.run, f.probe)) r.failures.push_back(f);
  }
  for (const auto& t : r.run.targets) {
    if (t.rounds == 0) r.failures.push_back({t.probe, t.target, "no round completed in the run"});
  }
  return r;
}

}  // namespace podnet::report
