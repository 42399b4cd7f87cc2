#include "exporter/report/report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "exporter/topology/safe_text.h"

namespace podnet::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using Labels = std::map<std::string, std::string>;

Labels LabelsOf(const prometheus::ClientMetric& m) {
  Labels l;
  for (const auto& p : m.label) l[p.name] = p.value;
  return l;
}

std::string Get(const Labels& l, const std::string& k) {
  auto it = l.find(k);
  return it == l.end() ? "" : it->second;
}

const prometheus::MetricFamily* Find(const std::vector<prometheus::MetricFamily>& fams,
                                     const std::string& name) {
  for (const auto& f : fams) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

double ValueOf(const prometheus::ClientMetric& m) {
  return m.counter.value + m.gauge.value + m.untyped.value;
}

// Calls fn(key, labels, series) for each series of family `name` whose labels include
// `match`; key: the values of the labels `by`, in that order ("" where absent). PromQL's
// `by (...)` grouping.
using Key = std::vector<std::string>;
template <typename Fn>
void ForEachSeries(const std::vector<prometheus::MetricFamily>& fams, const std::string& name,
                   const std::vector<std::string>& by, const Labels& match, Fn fn) {
  const auto* f = Find(fams, name);
  if (!f) return;
  for (const auto& m : f->metric) {
    Labels l = LabelsOf(m);
    bool ok = true;
    for (const auto& [k, v] : match) ok = ok && Get(l, k) == v;
    if (!ok) continue;
    Key key;
    for (const auto& b : by) key.push_back(Get(l, b));
    fn(key, l, m);
  }
}

// sum by (by) (name{match}) of a counter or gauge family.
std::map<Key, double> SumBy(const std::vector<prometheus::MetricFamily>& fams,
                            const std::string& name, const std::vector<std::string>& by,
                            const Labels& match = {}) {
  std::map<Key, double> out;
  ForEachSeries(fams, name, by, match,
                [&](const Key& key, const Labels&, const auto& m) { out[key] += ValueOf(m); });
  return out;
}

// sum by (by, le) (name_bucket) of a histogram family.
std::map<Key, Buckets> HistBy(const std::vector<prometheus::MetricFamily>& fams,
                              const std::string& name, const std::vector<std::string>& by) {
  std::map<Key, Buckets> out;
  ForEachSeries(fams, name, by, {}, [&](const Key& key, const Labels&, const auto& m) {
    Buckets b;
    for (const auto& bucket : m.histogram.bucket) {
      b.cumulative.emplace_back(bucket.upper_bound, static_cast<double>(bucket.cumulative_count));
    }
    b.count = static_cast<double>(m.histogram.sample_count);
    b.sum = m.histogram.sample_sum;
    out[key].Add(b);
  });
  return out;
}

// The distinct values of `label` per group (e.g. peers per path class).
std::map<Key, std::set<std::string>> DistinctBy(const std::vector<prometheus::MetricFamily>& fams,
                                                const std::string& name,
                                                const std::vector<std::string>& by,
                                                const std::string& label) {
  std::map<Key, std::set<std::string>> out;
  ForEachSeries(fams, name, by, {}, [&](const Key& key, const Labels& l, const auto&) {
    out[key].insert(Get(l, label));
  });
  return out;
}

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

// The percentile figures and their q.
constexpr std::pair<const char*, double> kPercentiles[] = {
    {"p50_seconds", 0.5}, {"p90_seconds", 0.9}, {"p99_seconds", 0.99}};

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

Section RttSection(const std::vector<prometheus::MetricFamily>& f, std::vector<Failure>& fail) {
  Section s{"rtt", "RTT by path class", false, {}, {}};
  auto hist = HistBy(f, "podnet_rtt_seconds", {"path_class", "protocol"});
  auto sent = SumBy(f, "podnet_rtt_packets_sent_total", {"path_class", "protocol"});
  auto recv = SumBy(f, "podnet_rtt_packets_received_total", {"path_class", "protocol"});
  auto peers = DistinctBy(f, "podnet_rtt_packets_sent_total", {"path_class", "protocol"}, "peer");
  for (const auto& [k, n] : sent) {
    Row row{KeyOf({"path_class", "protocol"}, k), {}};
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
  std::vector<std::string> by{"source_zone", "peer_zone"};
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
    row.figures["loss_ratio"] =
        Fig(loss, n > 0 ? std::max(1 / n, std::sqrt(loss * (1 - loss) / n)) : 0);
    AddLatency(row, hist[k]);
    s.rows.push_back(std::move(row));
  }
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
Section ClusterCostSection(const RunInfo& run, const Section& dns) {
  const CostInputs& in = *run.cluster_cost;
  Section s{
      "cluster_cost", "Cluster-wide probe traffic and cost (from the configuration)", true, {}, {}};
  PeersByClass peers;
  for (const auto& t : run.targets) {
    if (!t.path_class.empty()) ++peers[t.probe][t.path_class];
  }
  QuestionsPerLookup questions;
  for (const auto& row : dns.rows) {
    // Only a walk every lookup of which was answered: a refused or timed-out one stops early.
    auto it = row.figures.find("queries_per_lookup");
    auto failed = row.figures.find("failed_lookups");
    if (row.key.size() != 3 || it == row.figures.end() || !std::isfinite(it->second.value) ||
        failed == row.figures.end() || failed->second.value > 0) {
      continue;
    }
    questions[{row.key[0].second, row.key[1].second, row.key[2].second}] = it->second.value;
  }
  ClusterCost cost = ComputeClusterCost(in, peers, questions);
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

std::string Fmt(double v, int decimals) {
  if (std::isnan(v)) return "–";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

struct Column {
  const char* figure;
  const char* header;
  double scale;
  int decimals;
};

struct Layout {
  std::vector<std::string> key;
  std::vector<Column> columns;
};

// Key labels, then `columns`, then the latency columns (p99 where the kind has enough samples
// for one).
Layout With(std::vector<std::string> key, std::vector<Column> columns, bool latency, bool p99) {
  if (latency) {
    columns.push_back({"p50_seconds", "p50 ms", 1e3, 3});
    columns.push_back({"p90_seconds", "p90 ms", 1e3, 3});
    if (p99) columns.push_back({"p99_seconds", "p99 ms", 1e3, 3});
    columns.push_back({"max_seconds", "max ≤ ms", 1e3, 3});
  }
  return {std::move(key), std::move(columns)};
}

const Layout& LayoutOf(const std::string& id) {
  static const std::map<std::string, Layout> kLayouts = {
      {"rtt", With({"path_class", "protocol"},
                   {{"peers", "peers", 1, 0},
                    {"packets_sent", "sent", 1, 0},
                    {"loss_ratio", "loss %", 100, 1}},
                   true, true)},
      {"http",
       With({"path_class", "connection"},
            {{"requests", "requests", 1, 0}, {"failed_requests", "failed", 1, 0}}, true, true)},
      {"grpc",
       With({"path_class"}, {{"requests", "checks", 1, 0}, {"failed_requests", "failed", 1, 0}},
            true, true)},
      {"burst", With({"path_class", "streams"},
                     {{"throughput_bits_per_second", "Gbit/s", 1e-9, 3},
                      {"retransmits", "retransmits", 1, 0},
                      {"sent_bytes", "sent MB", 1e-6, 1},
                      {"tcp_rtt_seconds", "TCP RTT ms", 1e3, 3}},
                     false, false)},
      {"dns", With({"name", "form", "resolver"},
                   {{"lookups", "lookups", 1, 0},
                    {"queries_per_lookup", "questions/lookup", 1, 1},
                    {"nxdomain_per_lookup", "NXDOMAIN/lookup", 1, 1},
                    {"failed_lookups", "failed", 1, 0}},
                   true, false)},
      {"cost", With({"path_class"},
                    {{"run_bytes", "run MB", 1e-6, 3},
                     {"daemon_bytes_per_hour", "daemon MB/h", 1e-6, 3},
                     {"daemon_usd_per_30_days", "daemon $/30 d", 1, 4}},
                    false, false)},
      {"zones", With({"source_zone", "peer_zone"},
                     {{"peers", "peers", 1, 0},
                      {"packets_sent", "sent", 1, 0},
                      {"loss_ratio", "loss %", 100, 1}},
                     true, true)},
      {"mtu", With({"path_class", "direction"},
                   {{"peers", "peers", 1, 0},
                    {"path_mtu_min_bytes", "MTU min", 1, 0},
                    {"path_mtu_max_bytes", "MTU max", 1, 0},
                    {"interface_mtu_bytes", "interface", 1, 0},
                    {"black_hole_peers", "black holes", 1, 0}},
                   false, false)},
      {"cluster_cost", With({"probe", "path_class"},
                            {{"peers", "peers", 1, 0},
                             {"pod_bytes_per_hour", "MB/h per Pod", 1e-6, 3},
                             {"cluster_bytes_per_month", "GB/month, cluster", 1e-9, 2},
                             {"cluster_usd_per_month", "$/month, cluster", 1, 2}},
                            false, false)},
  };
  static const Layout kNone;
  auto it = kLayouts.find(id);
  return it == kLayouts.end() ? kNone : it->second;
}

// A section's name in the verdict's line.
std::string SectionShort(const std::string& id) {
  static const std::map<std::string, std::string> kNames = {{"rtt", "RTT"},
                                                            {"http", "HTTP"},
                                                            {"grpc", "gRPC"},
                                                            {"burst", "burst"},
                                                            {"dns", "DNS"},
                                                            {"cost", "cost"},
                                                            {"cluster_cost", "cluster cost"},
                                                            {"zones", "RTT"},
                                                            {"mtu", "path MTU"}};
  auto it = kNames.find(id);
  return it == kNames.end() ? id : it->second;
}

// A "±d" at a column's precision, "" when it rounds to zero there.
std::string Signed(double d, int decimals) {
  std::string s = Fmt(d, decimals);
  if (s.find_first_not_of("-0.") == std::string::npos) return "";
  return (d >= 0 ? "+" : "") + s;
}

// One Markdown cell: the value; a percentile the samples cannot carry "n<N"; after Compare(),
// its change when it moved at the column's precision ("(+0.226, +41% !)", ! beyond spread).
std::string Cell(const Row& row, const Column& c) {
  const Figure& f = row.figures.at(c.figure);
  std::string out = Fmt(f.value * c.scale, c.decimals);
  auto samples = row.figures.find("samples");
  if (std::isnan(f.value) && samples != row.figures.end()) {
    for (auto [name, q] : kPercentiles) {
      if (c.figure == std::string(name) && samples->second.value < MinSamplesFor(q)) {
        out = "n<" + std::to_string(MinSamplesFor(q));
      }
    }
  }
  if (!f.baseline) return out;
  double d = (f.value - *f.baseline) * c.scale;
  if (std::isnan(d)) return out;  // one of them is not a number: nothing to compare
  std::string change = Signed(d, c.decimals);
  if (change.empty() && !f.beyond_spread) return out;
  out += " (" + (change.empty() ? Fmt(d, c.decimals) : change);
  if (*f.baseline != 0 && std::isfinite(d)) {
    std::string pct = Signed(100 * d / (*f.baseline * c.scale), 0);
    if (!pct.empty()) out += ", " + pct + "%";
  }
  return out + (f.beyond_spread ? " !)" : ")");
}

nlohmann::json Number(double v) {
  if (std::isnan(v)) return nullptr;
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return v;
}

// ---- Reading a report back (FromJson): every value checked against its meaning -----------
//
// A report read with --input or --baseline is a file anyone could have written: a value that
// cannot be what its field means (a negative count, a string where a number belongs, a loss
// over 100 %) is refused with its JSON path, never printed as a figure.

using json = nlohmann::json;

// A refused value: where, and why. Thrown inside FromJson only, caught at its top.
struct Invalid {
  std::string path;
  std::string why;
};

std::string Member(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}
std::string Element(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// The offending value as JSON, short and in ASCII (control characters as \u escapes).
std::string Shown(const json& j) {
  // An array or object as its brackets only: dump() recurses once per level, and a value nested
  // 50,000 arrays deep (a 100 KB file) overflowed the stack here.
  if (j.is_array()) return j.empty() ? "[]" : "[...]";
  if (j.is_object()) return j.empty() ? "{}" : "{...}";
  std::string s = j.dump(-1, ' ', /*ensure_ascii=*/true);
  return s.size() <= 40 ? s : s.substr(0, 37) + "...";
}

const json& At(const json& object, const std::string& path, std::string_view key) {
  if (!object.is_object()) throw Invalid{path, Shown(object) + " is not an object"};
  auto it = object.find(key);
  if (it == object.end()) throw Invalid{Member(path, key), "is missing"};
  return *it;
}

const json& ReadArray(const json& j, const std::string& path) {
  if (!j.is_array()) throw Invalid{path, Shown(j) + " is not an array"};
  return j;
}

// Every string of a report (names, notes, reasons) as it may be printed: control characters
// and invalid UTF-8 escaped, so that a name cannot drive the terminal the Markdown is shown on.
std::string ReadText(const json& j, const std::string& path) {
  if (!j.is_string()) throw Invalid{path, Shown(j) + " is not a string"};
  return topology::SafeText(j.get_ref<const std::string&>(), kMaxReportTextBytes);
}

bool ReadBool(const json& j, const std::string& path) {
  if (!j.is_boolean()) throw Invalid{path, Shown(j) + " is not true or false"};
  return j.get<bool>();
}

// A non-negative integer that fits in an int (a count of rounds).
int ReadCount(const json& j, const std::string& path) {
  // nlohmann keeps a JSON integer as unsigned or, when written from a signed type, as signed.
  if (j.is_number_integer()) {
    std::int64_t v = j.is_number_unsigned()
                         ? static_cast<std::int64_t>(std::min<std::uint64_t>(
                               j.get<std::uint64_t>(), std::numeric_limits<std::int64_t>::max()))
                         : j.get<std::int64_t>();
    if (v < 0) throw Invalid{path, Shown(j) + " is negative (a count)"};
    if (v <= std::numeric_limits<int>::max()) return static_cast<int>(v);
  }
  throw Invalid{path, Shown(j) + " is not a count (an integer from 0)"};
}

// What a number may be: [lo, hi], and whether null (no value: NaN) or "+Inf" may stand for it.
struct Meaning {
  double lo = 0, hi = kInf;
  bool none = false;  // null: nothing measured (e.g. a percentile of no samples)
  bool inf = false;   // "+Inf": e.g. a sample above every bucket
  const char* what = "a non-negative number";
};

double ReadNumber(const json& j, const std::string& path, const Meaning& m) {
  auto refuse = [&](const std::string& why) { return Invalid{path, why + " (" + m.what + ")"}; };
  double v;
  if (j.is_number()) {
    v = j.get<double>();
  } else if (j.is_null()) {
    v = kNaN;
  } else if (j == "+Inf" || j == "-Inf") {
    v = j == "+Inf" ? kInf : -kInf;
  } else {
    throw refuse(Shown(j) + " is not a number");
  }
  if (std::isnan(v)) {
    if (!m.none) throw refuse("null where a value is needed");
    return v;
  }
  if (std::isinf(v)) {
    if (!(m.inf && v > 0)) throw refuse(Shown(j) + " is not finite");
    return v;  // "+Inf" where it may stand: above every bound, not a value past hi
  }
  if (v < m.lo) throw refuse(Shown(j) + (m.lo == 0 ? " is negative" : " is too small"));
  if (v > m.hi) throw refuse(Shown(j) + " is too large");
  return v;
}

// What each figure of ToJson means (Build() computes them): counts, a ratio, seconds, bytes.
// A figure this build does not know (a newer one's) is any number.
Meaning FigureMeaning(const std::string& name) {
  static const std::map<std::string, Meaning> kMeanings = {
      {"peers", {0, kMaxCount, false, false, "a count"}},
      {"packets_sent", {0, kMaxCount, false, false, "a count"}},
      {"requests", {0, kMaxCount, false, false, "a count"}},
      {"failed_requests", {0, kMaxCount, false, false, "a count"}},
      {"samples", {0, kMaxCount, false, false, "a count"}},
      {"retransmits", {0, kMaxCount, false, false, "a count"}},
      {"lookups", {0, kMaxCount, false, false, "a count"}},
      {"failed_lookups", {0, kMaxCount, false, false, "a count"}},
      {"loss_ratio", {0, 1, true, false, "a ratio from 0 to 1, or null"}},
      {"p50_seconds", {0, kMaxSeconds, true, false, "seconds, or null"}},
      {"p90_seconds", {0, kMaxSeconds, true, false, "seconds, or null"}},
      {"p99_seconds", {0, kMaxSeconds, true, false, "seconds, or null"}},
      {"max_seconds", {0, kMaxSeconds, true, true, "seconds, \"+Inf\" or null"}},
      {"tcp_rtt_seconds", {0, kMaxSeconds, false, false, "seconds"}},
      {"throughput_bits_per_second", {0, kMaxBitsPerSecond, false, false, "bits per second"}},
      {"sent_bytes", {0, kMaxCount, false, false, "bytes"}},
      {"queries_per_lookup", {0, kMaxCount, true, false, "a non-negative ratio, or null"}},
      {"nxdomain_per_lookup", {0, kMaxCount, true, false, "a non-negative ratio, or null"}},
      {"run_bytes", {0, kMaxCount, false, false, "bytes"}},
      {"daemon_bytes_per_hour", {0, kMaxCount, false, false, "bytes per hour"}},
      {"daemon_usd_per_30_days", {0, kMaxCount, false, false, "US dollars"}},
      {"pods", {0, kMaxCount, false, false, "a count"}},
      {"zones", {0, kMaxCount, false, false, "a count"}},
      {"series_per_pod", {0, kMaxCount, false, false, "a count"}},
      {"pod_bytes_per_hour", {0, kMaxCount, false, false, "bytes per hour"}},
      {"cluster_bytes_per_month", {0, kMaxCount, false, false, "bytes"}},
      {"cluster_usd_per_month", {0, kMaxCount, false, false, "US dollars"}},
      {"path_mtu_min_bytes", {0, kMaxMtuBytes, true, false, "bytes, at most 65,536, or null"}},
      {"path_mtu_max_bytes", {0, kMaxMtuBytes, true, false, "bytes, at most 65,536, or null"}},
      {"interface_mtu_bytes", {0, kMaxMtuBytes, true, false, "bytes, at most 65,536, or null"}},
      {"black_hole_peers", {0, kMaxCount, false, false, "a count"}},
  };
  auto it = kMeanings.find(name);
  if (it != kMeanings.end()) return it->second;
  return {-kInf, kInf, true, true, "a number, \"+Inf\" or null"};
}

// A spread is a distance: non-negative, at most what its figure may be (a count's at most
// kMaxCount); +Inf for a figure never marked; null when its figure is.
Meaning SpreadMeaning(const Meaning& figure) {
  return {0, figure.hi, true, true,
          "a non-negative number no larger than its figure may be, "
          "\"+Inf\" or null"};
}

Figure ReadFigure(const json& jf, const std::string& path, const std::string& name) {
  Meaning m = FigureMeaning(name);
  Figure f = Fig(ReadNumber(At(jf, path, "value"), Member(path, "value"), m),
                 ReadNumber(At(jf, path, "spread"), Member(path, "spread"), SpreadMeaning(m)));
  if (jf.contains("baseline")) {
    f.baseline = ReadNumber(jf.at("baseline"), Member(path, "baseline"), m);
    f.beyond_spread = ReadBool(At(jf, path, "beyond_spread"), Member(path, "beyond_spread"));
  }
  return f;
}

Report ReadBody(const json& j) {
  Report r;
  const json& run = At(j, "", "run");
  const json& self = At(run, "run", "self");
  r.run.self_name = ReadText(At(self, "run.self", "name"), "run.self.name");
  r.run.self_node = ReadText(At(self, "run.self", "node"), "run.self.node");
  r.run.self_zone = ReadText(At(self, "run.self", "zone"), "run.self.zone");
  r.run.version = ReadText(At(run, "run", "exporter_version"), "run.exporter_version");
  r.run.started = ReadText(At(run, "run", "started"), "run.started");
  r.run.duration_seconds =
      ReadNumber(At(run, "run", "duration_seconds"), "run.duration_seconds", {.what = "seconds"});
  r.run.price_usd_per_gb = ReadNumber(At(run, "run", "price_usd_per_gb"), "run.price_usd_per_gb",
                                      {.what = "US dollars per GB"});
  const json& configured = ReadArray(At(run, "run", "configured"), "run.configured");
  for (std::size_t i = 0; i < configured.size(); ++i) {
    r.run.configured.push_back(ReadText(configured[i], Element("run.configured", i)));
  }
  const json& intervals = At(run, "run", "interval_seconds");
  if (!intervals.is_object()) {
    throw Invalid{"run.interval_seconds", Shown(intervals) + " is not an object"};
  }
  for (const auto& [kind, v] : intervals.items()) {
    std::string path = Member("run.interval_seconds", kind);
    r.run.interval_seconds[ReadText(kind, path)] = ReadNumber(v, path, {.what = "seconds"});
  }
  const json& targets = ReadArray(At(run, "run", "targets"), "run.targets");
  for (std::size_t i = 0; i < targets.size(); ++i) {
    std::string path = Element("run.targets", i);
    const json& t = targets[i];
    r.run.targets.push_back({ReadText(At(t, path, "probe"), Member(path, "probe")),
                             ReadText(At(t, path, "target"), Member(path, "target")),
                             ReadText(At(t, path, "path_class"), Member(path, "path_class")),
                             ReadCount(At(t, path, "rounds"), Member(path, "rounds"))});
  }
  const json& sections = ReadArray(At(j, "", "sections"), "sections");
  // A section id seen twice would be printed twice and compared once (the last copy): refused.
  std::map<std::string, std::size_t> ids;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    std::string path = Element("sections", i);
    const json& js = sections[i];
    Section s;
    s.id = ReadText(At(js, path, "id"), Member(path, "id"));
    if (auto [first, fresh] = ids.emplace(s.id, i); !fresh) {
      throw Invalid{Member(path, "id"), "repeats the id of " + Element("sections", first->second)};
    }
    s.title = ReadText(At(js, path, "title"), Member(path, "title"));
    s.configured = ReadBool(At(js, path, "configured"), Member(path, "configured"));
    const json& notes = ReadArray(At(js, path, "notes"), Member(path, "notes"));
    for (std::size_t n = 0; n < notes.size(); ++n) {
      s.notes.push_back(ReadText(notes[n], Element(Member(path, "notes"), n)));
    }
    const Layout& layout = LayoutOf(s.id);
    const json& rows = ReadArray(At(js, path, "rows"), Member(path, "rows"));
    // A key seen twice in one section would print two rows for one thing and make a comparison
    // ambiguous: refused, naming the second row and the first.
    std::map<std::vector<std::pair<std::string, std::string>>, std::size_t> seen;
    for (std::size_t k = 0; k < rows.size(); ++k) {
      std::string row_path = Element(Member(path, "rows"), k);
      Row row;
      const json& key = At(rows[k], row_path, "key");
      for (const auto& name : layout.key) {
        if (key.is_object() && key.contains(name)) {
          row.key.emplace_back(name, ReadText(key.at(name), Member(Member(row_path, "key"), name)));
        }
      }
      const json& figures = At(rows[k], row_path, "figures");
      if (!figures.is_object()) {
        throw Invalid{Member(row_path, "figures"), Shown(figures) + " is not an object"};
      }
      for (const auto& [name, jf] : figures.items()) {
        std::string fig_path = Member(Member(row_path, "figures"), name);
        row.figures[ReadText(name, fig_path)] = ReadFigure(jf, fig_path, name);
      }
      auto [first, fresh] = seen.emplace(row.key, k);
      if (!fresh) {
        throw Invalid{Member(row_path, "key"),
                      "repeats the key of " + Element(Member(path, "rows"), first->second)};
      }
      s.rows.push_back(std::move(row));
    }
    r.sections.push_back(std::move(s));
  }
  const json& failures = ReadArray(At(j, "", "failures"), "failures");
  for (std::size_t i = 0; i < failures.size(); ++i) {
    std::string path = Element("failures", i);
    const json& f = failures[i];
    r.failures.push_back({ReadText(At(f, path, "probe"), Member(path, "probe")),
                          ReadText(At(f, path, "target"), Member(path, "target")),
                          ReadText(At(f, path, "reason"), Member(path, "reason"))});
  }
  if (j.contains("baseline")) {
    r.compared = true;
    r.baseline_started =
        ReadText(At(At(j, "", "baseline"), "baseline", "started"), "baseline.started");
  }
  return r;
}

}  // namespace

void Buckets::Add(const Buckets& other) {
  if (cumulative.empty()) {
    cumulative = other.cumulative;
  } else {
    for (std::size_t i = 0; i < cumulative.size() && i < other.cumulative.size(); ++i) {
      cumulative[i].second += other.cumulative[i].second;
    }
  }
  count += other.count;
  sum += other.sum;
}

double BucketQuantile(double q, const Buckets& b) {
  if (b.cumulative.size() < 2 || !std::isinf(b.cumulative.back().first)) return kNaN;
  double total = b.cumulative.back().second;
  if (total <= 0) return kNaN;
  double rank = q * total;
  std::size_t i = 0;
  while (i < b.cumulative.size() && b.cumulative[i].second < rank) ++i;
  if (i >= b.cumulative.size() - 1) return b.cumulative[b.cumulative.size() - 2].first;
  if (i == 0 && b.cumulative[0].first <= 0) return b.cumulative[0].first;
  double start = 0, end = b.cumulative[i].first, count = b.cumulative[i].second;
  if (i > 0) {
    start = b.cumulative[i - 1].first;
    count -= b.cumulative[i - 1].second;
    rank -= b.cumulative[i - 1].second;
  }
  return start + (end - start) * (rank / count);
}

double BucketMaxBound(const Buckets& b) {
  if (b.cumulative.empty() || b.cumulative.back().second <= 0) return kNaN;
  for (const auto& [bound, n] : b.cumulative) {
    if (n >= b.cumulative.back().second) return bound;
  }
  return kNaN;
}

Report Build(const std::vector<prometheus::MetricFamily>& families, RunInfo run) {
  Report r;
  r.run = std::move(run);
  std::vector<Failure> fails;
  r.sections = {RttSection(families, fails),  HttpSection(families, fails),
                GrpcSection(families, fails), BurstSection(families, fails),
                DnsSection(families, fails),  CostSection(families, r.run)};
  for (auto& s : r.sections) {
    if (s.id == "cost") continue;
    s.configured = Configured(r.run, s.id);
    if (!s.configured) {
      s.rows.clear();
      s.notes = {"not configured (probes." + s.id + " is absent from the configuration)"};
      continue;
    }
    AddErrorNotes(s, families);
  }
  // After the DNS section's rows are final: its questions per lookup feed the arithmetic.
  if (r.run.cluster_cost) r.sections.push_back(ClusterCostSection(r.run, r.sections[4]));
  Section zones = ZonesSection(families);
  zones.configured = Configured(r.run, "rtt");
  if (!zones.configured) {
    zones.rows.clear();
    zones.notes = {"not configured (probes.rtt is absent from the configuration)"};
  }
  r.sections.push_back(std::move(zones));
  Section mtu = MtuSection(families, fails);
  mtu.configured = Configured(r.run, "mtu");
  if (!mtu.configured) {
    mtu.rows.clear();
    mtu.notes = {"not configured (probes.mtu is absent from the configuration)"};
  } else {
    AddErrorNotes(mtu, families);
  }
  r.sections.push_back(std::move(mtu));
  for (const auto& f : fails) {
    if (Configured(r.run, f.probe)) r.failures.push_back(f);
  }
  for (const auto& t : r.run.targets) {
    if (t.rounds == 0) r.failures.push_back({t.probe, t.target, "no round completed in the run"});
  }
  return r;
}

namespace {

using RowKey = std::vector<std::pair<std::string, std::string>>;

// A row as the verdict names it: "RTT cross_zone icmp".
std::string RowName(const std::string& section, const RowKey& key) {
  std::string out = SectionShort(section);
  for (const auto& [k, v] : key) out += " " + v;
  return out;
}

// The sections a verdict weighs, by id: those with columns this build knows, zones aside (the
// RTT section's samples again).
std::map<std::string, const Section*> WeighedSections(const Report& r) {
  std::map<std::string, const Section*> out;
  for (const auto& s : r.sections) {
    if (s.id != "zones" && !LayoutOf(s.id).columns.empty()) out[s.id] = &s;
  }
  return out;
}

// The shown figures Build() never marks: their spread is +Inf by design (a histogram keeps no
// maximum; one burst's retransmits and TCP RTT give no spread).
bool NeverMarked(std::string_view figure) {
  return figure == "max_seconds" || figure == "retransmits" || figure == "tcp_rtt_seconds";
}

// Why figure `a` (the input's) and `b` (the baseline's) of column `figure` cannot be compared
// ("" when they can, or when neither side has anything to compare: both null, or a figure
// never marked with +Inf spreads on both sides).
std::string UncomparedWhy(std::string_view figure, const Figure* a, const Figure* b) {
  auto side = [](bool input) { return std::string(input ? "input" : "baseline"); };
  if (!a && !b) return "";
  if (!a || !b) return "not in the " + side(!a);
  bool na = std::isnan(a->value), nb = std::isnan(b->value);
  if (na && nb) return "";
  if (na || nb) return "no value in the " + side(na);
  bool fa = std::isfinite(a->spread), fb = std::isfinite(b->spread);
  if (!fa && !fb) return NeverMarked(figure) ? "" : "spread not finite on either side";
  if (!fa || !fb) return "spread not finite in the " + side(!fa);
  return "";
}

// Report::uncompared of `report` against `baseline` (Compare()'s docstring says what counts).
std::vector<std::string> Uncompared(const Report& report, const Report& baseline) {
  std::vector<std::string> out;
  auto in = WeighedSections(report), base = WeighedSections(baseline);
  std::set<std::string> ids;
  for (const auto* side : {&in, &base}) {
    for (const auto& [id, s] : *side) ids.insert(id);
  }
  for (const auto& id : ids) {
    auto a = in.find(id), b = base.find(id);
    if (a == in.end() || b == base.end()) {
      const Section& only = a == in.end() ? *b->second : *a->second;
      if (only.configured || !only.rows.empty()) {
        out.push_back("section " + id + ": not in the " + (a == in.end() ? "input" : "baseline"));
      }
      continue;
    }
    std::map<RowKey, const Row*> base_rows;
    for (const auto& row : b->second->rows) base_rows[row.key] = &row;
    std::set<RowKey> matched;
    for (const auto& row : a->second->rows) {
      auto found = base_rows.find(row.key);
      if (found == base_rows.end()) {
        out.push_back(RowName(id, row.key) + ": not in the baseline");
        continue;
      }
      matched.insert(row.key);
      for (const auto& c : LayoutOf(id).columns) {
        auto fa = row.figures.find(c.figure), fb = found->second->figures.find(c.figure);
        std::string why = UncomparedWhy(c.figure, fa == row.figures.end() ? nullptr : &fa->second,
                                        fb == found->second->figures.end() ? nullptr : &fb->second);
        if (!why.empty()) out.push_back(RowName(id, row.key) + " " + c.figure + ": " + why);
      }
    }
    for (const auto& row : b->second->rows) {
      if (!matched.count(row.key)) out.push_back(RowName(id, row.key) + ": not in the input");
    }
  }
  return out;
}

}  // namespace

void Compare(Report& report, const Report& baseline) {
  report.compared = true;
  report.baseline_started = baseline.run.started;
  report.uncompared = Uncompared(report, baseline);
  // One lookup table for the baseline, keyed by section id and row key: a linear search per row
  // made a comparison of two 80,000-row reports take 52 s. FromJson refuses a repeated key, so
  // each (section, key) names at most one row; Build() never repeats one either.
  std::map<std::pair<std::string, RowKey>, const Row*> rows;
  for (const auto& b : baseline.sections) {
    for (const auto& row : b.rows) rows[{b.id, row.key}] = &row;
  }
  for (auto& s : report.sections) {
    for (auto& row : s.rows) {
      auto found = rows.find({s.id, row.key});
      if (found == rows.end()) continue;
      const Row* br = found->second;
      for (auto& [name, fig] : row.figures) {
        auto it = br->figures.find(name);
        if (it == br->figures.end()) continue;
        fig.baseline = it->second.value;
        double change = fig.value - it->second.value;
        double spread = std::max(fig.spread, it->second.spread);
        // A value that became +Inf (a sample above every bucket) moved beyond any finite spread;
        // both +Inf (NaN) is no change.
        fig.beyond_spread = !std::isnan(change) && std::abs(change) > spread + 1e-12;
      }
    }
  }
}

int BeyondSpread(const Report& report) {
  int n = 0;
  for (const auto& s : report.sections) {
    for (const auto& row : s.rows) {
      for (const auto& [name, fig] : row.figures) n += fig.beyond_spread;
    }
  }
  return n;
}

int MinSamplesFor(double q) {
  int n = 1;
  while (n < 100000 && 1 - std::pow(q, n) - std::pow(1 - q, n) < 0.95) ++n;
  return n;
}

Verdict VerdictOf(const Report& r) {
  Verdict v;
  if (!r.compared) return v;
  for (const auto& s : r.sections) {
    if (s.id == "zones") continue;  // the RTT section's samples again: counted there
    for (const auto& row : s.rows) {
      for (const auto& c : LayoutOf(s.id).columns) {
        auto it = row.figures.find(c.figure);
        if (it == row.figures.end()) continue;
        const Figure& f = it->second;
        if (!f.baseline || std::isnan(f.value) || std::isnan(*f.baseline) ||
            !std::isfinite(f.spread)) {
          continue;
        }
        ++v.figures;
        // Compare() marked it against the larger of the two spreads; the baseline's is not
        // kept, so this run's is the one shown and ranked by.
        if (f.beyond_spread)
          v.changed.push_back({s.id, row.key, c.figure, f.value, *f.baseline, f.spread});
      }
    }
  }
  auto excess = [](const Change& c) {
    double d = std::abs(c.value - c.baseline);
    return c.spread > 0 ? d / c.spread : kInf;
  };
  std::stable_sort(v.changed.begin(), v.changed.end(),
                   [&](const Change& a, const Change& b) { return excess(a) > excess(b); });
  constexpr std::size_t kNamed = 3;
  v.uncompared = r.uncompared;
  v.complete = v.uncompared.empty() && v.figures > 0;
  if (!v.uncompared.empty()) {
    v.line = "Incomplete comparison: " + std::to_string(v.uncompared.size()) +
             " could not be compared (";
    for (std::size_t i = 0; i < v.uncompared.size() && i < kNamed; ++i) {
      v.line += (i ? "; " : "") + v.uncompared[i];
    }
    if (v.uncompared.size() > kNamed) {
      v.line += "; and " + std::to_string(v.uncompared.size() - kNamed) + " more";
    }
    v.line += "). ";
  } else if (v.figures == 0) {
    v.line = "Incomplete comparison: no figure on either side. ";
  }
  if (v.changed.empty()) {
    v.line +=
        "No change beyond the run-to-run spread in " + std::to_string(v.figures) + " figures.";
    return v;
  }
  v.line += std::to_string(v.changed.size()) + " of " + std::to_string(v.figures) +
            " figures changed beyond their run-to-run spread: ";
  for (std::size_t i = 0; i < v.changed.size() && i < kNamed; ++i) {
    const Change& c = v.changed[i];
    const Column* col = nullptr;
    for (const auto& k : LayoutOf(c.section).columns) {
      if (c.figure == k.figure) col = &k;
    }
    v.line += (i ? "; " : "") + RowName(c.section, c.key);
    v.line += " " + std::string(col->header) + " " + Fmt(c.baseline * col->scale, col->decimals) +
              " → " + Fmt(c.value * col->scale, col->decimals);
    if (c.baseline != 0 && std::isfinite(c.value)) {  // no "+Inf %" for a +Inf max
      double pct = 100 * (c.value - c.baseline) / c.baseline;
      v.line += " (" + std::string(pct >= 0 ? "+" : "") + Fmt(pct, 0) + " %)";
    }
  }
  if (v.changed.size() > kNamed) {
    v.line += "; and " + std::to_string(v.changed.size() - kNamed) + " more";
  }
  v.line += ".";
  return v;
}

nlohmann::json ToJson(const Report& r) {
  nlohmann::json j;
  j["schema"] = "podnet-exporter-report";
  j["version"] = Report::kVersion;
  j["run"] = {
      {"self", {{"name", r.run.self_name}, {"node", r.run.self_node}, {"zone", r.run.self_zone}}},
      {"exporter_version", r.run.version},
      {"started", r.run.started},
      {"duration_seconds", r.run.duration_seconds},
      {"price_usd_per_gb", r.run.price_usd_per_gb},
      {"configured", r.run.configured},
      {"interval_seconds", r.run.interval_seconds}};
  auto& targets = j["run"]["targets"] = nlohmann::json::array();
  for (const auto& t : r.run.targets) {
    targets.push_back({{"probe", t.probe},
                       {"target", t.target},
                       {"path_class", t.path_class},
                       {"rounds", t.rounds}});
  }
  auto& sections = j["sections"] = nlohmann::json::array();
  for (const auto& s : r.sections) {
    nlohmann::json js{{"id", s.id},
                      {"title", s.title},
                      {"configured", s.configured},
                      {"notes", s.notes},
                      {"rows", nlohmann::json::array()}};
    for (const auto& row : s.rows) {
      nlohmann::json key = nlohmann::json::object(), figs = nlohmann::json::object();
      for (const auto& [k, v] : row.key) key[k] = v;
      for (const auto& [name, f] : row.figures) {
        nlohmann::json jf{{"value", Number(f.value)}, {"spread", Number(f.spread)}};
        if (f.baseline) {
          jf["baseline"] = Number(*f.baseline);
          jf["beyond_spread"] = f.beyond_spread;
        }
        figs[name] = std::move(jf);
      }
      js["rows"].push_back({{"key", key}, {"figures", figs}});
    }
    sections.push_back(std::move(js));
  }
  auto& failures = j["failures"] = nlohmann::json::array();
  for (const auto& f : r.failures) {
    failures.push_back({{"probe", f.probe}, {"target", f.target}, {"reason", f.reason}});
  }
  if (r.compared) {
    j["baseline"] = {{"started", r.baseline_started}};
    Verdict v = VerdictOf(r);
    j["verdict"] = {{"figures", v.figures},
                    {"complete", v.complete},
                    {"summary", v.line},
                    {"changed", nlohmann::json::array()},
                    {"uncompared", v.uncompared}};
    for (const auto& c : v.changed) {
      nlohmann::json key = nlohmann::json::object();
      for (const auto& [k, val] : c.key) key[k] = val;
      j["verdict"]["changed"].push_back({{"section", c.section},
                                         {"key", key},
                                         {"figure", c.figure},
                                         {"value", Number(c.value)},
                                         {"baseline", Number(c.baseline)},
                                         {"spread", Number(c.spread)}});
    }
  }
  return j;
}

std::optional<Report> FromJson(const nlohmann::json& j, std::string* error) {
  if (!j.is_object() || !j.contains("schema") || j.at("schema") != "podnet-exporter-report") {
    *error = "not a podnet-exporter report (\"schema\" is not \"podnet-exporter-report\")";
    return std::nullopt;
  }
  // Only an integer names a version: 1.5 is not version 1.
  const json* version = j.contains("version") ? &j.at("version") : nullptr;
  if (!version || !(version->is_number_integer() || version->is_number_unsigned()) ||
      *version != Report::kVersion) {
    *error = "report version " + (version ? Shown(*version) : std::string("(missing)")) +
             ", this build reads version " + std::to_string(Report::kVersion);
    return std::nullopt;
  }
  try {
    return ReadBody(j);
  } catch (const Invalid& e) {
    // A path holds the document's own keys (figure names): shown like its strings.
    *error = topology::SafeText(e.path, kMaxReportTextBytes) + ": " + e.why;
    return std::nullopt;
  }
}

Table TableOf(const Section& s) {
  Table t;
  if (!s.configured) return t;
  const Layout& layout = LayoutOf(s.id);
  t.header = layout.key;
  t.key_columns = layout.key.size();
  for (const auto& c : layout.columns) t.header.emplace_back(c.header);
  for (const auto& row : s.rows) {
    std::vector<std::string> cells;
    for (const auto& [k, v] : row.key) cells.push_back(v);
    for (const auto& c : layout.columns) {
      cells.push_back(row.figures.count(c.figure) ? Cell(row, c) : "–");
    }
    t.rows.push_back(std::move(cells));
  }
  return t;
}

namespace {

// ---- Markdown: every string from outside (a name from Kubernetes or the configuration, or any
// text of a report read back) is escaped where it lands, so it shows as itself and adds no
// markup. A report is pasted into tickets and PRs, where raw HTML (an <img> that loads) or a
// link would act. Two contexts, one rule each (CommonMark 0.31, GFM 0.29):
//  - Text (table cells, notes, failures, titles): `\` and the punctuation that can open markup
//    (`*`, `_` except inside a word, `` ` ``, `[`, `]`, `~`, and `|`, which splits a GFM table
//    cell even in a code span) get a backslash: CommonMark §2.4, any ASCII punctuation may be
//    backslash-escaped and is then literal. `<`, `>`, `&` become entities (§2.5), so no raw HTML
//    (§6.6) or autolink (§6.5) starts. `(`, `)`, `!` stay: a link or image needs an unescaped `[`.
//    An intraword `_` cannot open or close emphasis (§6.2), so same_zone stays readable.
//  - Code spans (the prober's names): literal inside, no escape applies (§6.1); the fence is one
//    backtick longer than the longest run inside, padded with a space when the text starts or
//    ends with a backtick or a space (one space each side is stripped).
// Control characters were replaced on the way in (topology::SafeText), so no newline remains.
// The HTML report escapes for HTML instead (report_html.cc).
std::string MdText(const std::string& text) {
  static const std::map<char, std::string_view> kEntities = {
      {'<', "&lt;"}, {'>', "&gt;"}, {'&', "&amp;"}};
  auto word = [&](std::size_t i) {
    return i < text.size() && std::isalnum(static_cast<unsigned char>(text[i]));
  };
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (auto e = kEntities.find(c); e != kEntities.end()) {
      out += e->second;
      continue;
    }
    bool intraword = c == '_' && i > 0 && word(i - 1) && word(i + 1);
    if (std::string_view("\\*_`[]~|").find(c) != std::string_view::npos && !intraword) {
      out += '\\';
    }
    out += c;
  }
  return out;
}

std::string MdCode(const std::string& text) {
  std::size_t longest = 0, run = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  std::string fence(longest + 1, '`');
  bool pad = text.empty() || text.front() == '`' || text.back() == '`' || text.front() == ' ' ||
             text.back() == ' ';
  return fence + (pad ? " " : "") + text + (pad ? " " : "") + fence;
}

}  // namespace

std::string ToMarkdown(const Report& r) {
  std::ostringstream out;
  out << "# podnet-exporter report\n\n";
  if (r.compared) out << "**Verdict:** " << MdText(VerdictOf(r).line) << "\n\n";
  out << "Prober " << MdCode(r.run.self_name) << " (node " << MdCode(r.run.self_node) << ", zone "
      << MdCode(r.run.self_zone.empty() ? "?" : r.run.self_zone) << "), podnet-exporter "
      << MdText(r.run.version) << ", started " << MdText(r.run.started)
      << ", rounds started within " << Fmt(r.run.duration_seconds, 0) << " s.\n";
  if (r.compared) {
    out << "\nAgainst the baseline of " << MdText(r.baseline_started)
        << ": each cell shows the change; `!` marks a change larger than the spread of either "
           "run (docs/design.md, \"One-shot report\").\n";
  }
  for (const auto& s : r.sections) {
    out << "\n## " << MdText(s.title) << "\n\n";
    if (!s.configured) {
      out << "Not configured (" << MdCode("probes." + s.id) << " is absent).\n";
      continue;
    }
    Table t = TableOf(s);
    if (t.rows.empty()) {
      out << "No measurement recorded.\n";
    } else {
      out << "|";
      for (const auto& h : t.header) out << " " << MdText(h) << " |";
      out << "\n|";
      for (std::size_t i = 0; i < t.header.size(); ++i)
        out << (i < t.key_columns ? "---|" : "---:|");
      out << "\n";
      for (const auto& cells : t.rows) {
        out << "|";
        // The key's values are names; the figures' cells are this program's numbers.
        for (std::size_t i = 0; i < cells.size(); ++i) {
          out << " " << (i < t.key_columns ? MdText(cells[i]) : cells[i]) << " |";
        }
        out << "\n";
      }
    }
    if (!s.notes.empty()) out << "\n";
    for (const auto& n : s.notes) out << "- " << MdText(n) << "\n";
  }
  out << "\n## Failures\n\n";
  if (r.failures.empty()) out << "None: every configured probe got answers from every target.\n";
  for (const auto& f : r.failures) {
    out << "- " << MdText(f.probe) << " → " << MdText(f.target) << ": " << MdText(f.reason) << "\n";
  }
  return out.str();
}

}  // namespace podnet::report
