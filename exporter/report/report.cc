#include "exporter/report/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <sstream>

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

// The distinct values of `label` per group (e.g. peers per path).
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

// Latency figures of one row: p50/p90/p99 interpolated in buckets, the max bucket bound, and
// their spreads (docs/design.md, "One-shot report"): p90 − p50 for p50 and p90, p99 − p50 for
// p99 and max — how far the samples of this very run lie apart — and never less than the
// width of the figure's bucket (a smaller change is below what the histogram resolves).
void AddLatency(Row& row, const Buckets& b) {
  double p50 = BucketQuantile(0.5, b), p90 = BucketQuantile(0.9, b), p99 = BucketQuantile(0.99, b);
  double body = p90 - p50, tail = p99 - p50, max = BucketMaxBound(b);
  auto at = [&](double x, double spread) { return Fig(x, std::max(spread, BucketWidthAt(x, b))); };
  row.figures["p50_seconds"] = at(p50, body);
  row.figures["p90_seconds"] = at(p90, body);
  row.figures["p99_seconds"] = at(p99, tail);
  row.figures["max_seconds"] = at(max, tail);
  row.figures["samples"] = Fig(b.count, std::sqrt(b.count));
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

// The target a per-peer series names: its peer, or its path when peers are aggregated away.
std::string TargetOf(const Key& k) { return k[0].empty() ? "path=" + k[1] : k[0]; }

// Appends "reason ×n" to a comma-separated list of error counts ("timeout ×3, refused ×1").
void AppendErrorCount(std::string& line, const std::string& reason, double n) {
  line += (line.empty() ? "" : ", ") + reason + " ×" + std::to_string(static_cast<long>(n));
}

// "peer cross: timeout ×3, refused ×1" lines from podnet_probe_errors_total{probe=kind}.
void AddErrorNotes(Section& s, const std::vector<prometheus::MetricFamily>& fams) {
  auto errors = SumBy(fams, "podnet_probe_errors_total", {"peer", "path", "name", "reason"},
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
  auto hist = HistBy(f, "podnet_rtt_seconds", {"path", "protocol"});
  auto sent = SumBy(f, "podnet_rtt_packets_sent_total", {"path", "protocol"});
  auto recv = SumBy(f, "podnet_rtt_packets_received_total", {"path", "protocol"});
  auto peers = DistinctBy(f, "podnet_rtt_packets_sent_total", {"path", "protocol"}, "peer");
  for (const auto& [k, n] : sent) {
    Row row{KeyOf({"path", "protocol"}, k), {}};
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
  auto sent_peer = SumBy(f, "podnet_rtt_packets_sent_total", {"peer", "path"});
  auto recv_peer = SumBy(f, "podnet_rtt_packets_received_total", {"peer", "path"});
  for (const auto& [k, n] : sent_peer) {
    double r = recv_peer.count(k) ? recv_peer[k] : 0;
    if (n > 0 && r == 0) {
      fail.push_back({"rtt", TargetOf(k),
                      "100% loss (" + std::to_string(static_cast<long>(n)) + " packets sent)"});
    }
  }
  s.notes.push_back(
      "p50/p90/p99 are interpolated inside podnet_rtt_seconds' buckets, as PromQL's "
      "histogram_quantile does (adjacent bounds at most 33.4 % apart); max is the upper bound "
      "of the highest bucket with a sample. Loss counts replies that never came within the "
      "timeout.");
  return s;
}

// HTTP and gRPC: requests, those not answered `ok_code`, latency; a peer with requests and no
// `ok_code` answer failed.
struct RequestKind {
  const char* id;
  const char* title;
  const char* duration;         // histogram family
  const char* requests;         // counter family with a `code` label
  std::vector<std::string> by;  // path first
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
       {"path", "connection"},
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
                         {"path"},
                         "OK",
                         "checks",
                         "grpc.health.v1.Health/Check round trips; percentiles interpolated in "
                         "buckets (histogram_quantile)."},
                        f, fail);
}

Section BurstSection(const std::vector<prometheus::MetricFamily>& f, std::vector<Failure>& fail) {
  Section s{"burst", "TCP bursts: 1 and N streams", false, {}, {}};
  std::vector<std::string> by{"path", "streams"};
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
    row.figures["retransmits"] = Count(retrans[k]);
    // Bytes follow throughput over a fixed duration: the same relative spread.
    row.figures["sent_bytes"] = Fig(sent[k], mean > 0 ? sent[k] * spread / mean : 0);
    // One burst gives no spread for its smoothed RTT (it swings with the queue it built): shown,
    // never marked.
    row.figures["tcp_rtt_seconds"] = Fig(rtt[k] / peers, kInf);
    s.rows.push_back(std::move(row));
  }
  auto tput_peer = SumBy(f, "podnet_burst_throughput_bytes_per_second", {"peer", "path"});
  for (const auto& [k, bps] : tput_peer) {
    if (bps <= 0) fail.push_back({"burst", TargetOf(k), "no throughput measured"});
  }
  // A peer none of whose bursts completed has no throughput series at all, only errors: that
  // is a failure too. A burst skipped for the byte budget (budget_exhausted) is the
  // configuration's choice, not the peer's failure; it stays a note.
  std::map<Key, std::string> no_burst;
  auto errors =
      SumBy(f, "podnet_probe_errors_total", {"peer", "path", "reason"}, {{"probe", "burst"}});
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
  auto sent = SumBy(f, "podnet_probe_sent_bytes_total", {"path", "probe"});
  auto recv = SumBy(f, "podnet_probe_received_bytes_total", {"path", "probe"});
  std::map<std::pair<std::string, std::string>, int> rounds;  // (path, kind) → rounds
  for (const auto& t : run.targets) rounds[{t.path, t.probe}] += t.rounds;
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
    Row row{{{"path", path}}, {}};
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
      {"rtt", With({"path", "protocol"},
                   {{"peers", "peers", 1, 0},
                    {"packets_sent", "sent", 1, 0},
                    {"loss_ratio", "loss %", 100, 1}},
                   true, true)},
      {"http",
       With({"path", "connection"},
            {{"requests", "requests", 1, 0}, {"failed_requests", "failed", 1, 0}}, true, true)},
      {"grpc", With({"path"}, {{"requests", "checks", 1, 0}, {"failed_requests", "failed", 1, 0}},
                    true, true)},
      {"burst", With({"path", "streams"},
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
      {"cost", With({"path"},
                    {{"run_bytes", "run MB", 1e-6, 3},
                     {"daemon_bytes_per_hour", "daemon MB/h", 1e-6, 3},
                     {"daemon_usd_per_30_days", "daemon $/30 d", 1, 4}},
                    false, false)},
  };
  static const Layout kNone;
  auto it = kLayouts.find(id);
  return it == kLayouts.end() ? kNone : it->second;
}

nlohmann::json Number(double v) {
  if (std::isnan(v)) return nullptr;
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return v;
}

double NumberOf(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) return j.get<std::string>() == "-Inf" ? -kInf : kInf;
  return kNaN;
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
  for (const auto& f : fails) {
    if (Configured(r.run, f.probe)) r.failures.push_back(f);
  }
  for (const auto& t : r.run.targets) {
    if (t.rounds == 0) r.failures.push_back({t.probe, t.target, "no round completed in the run"});
  }
  return r;
}

void Compare(Report& report, const Report& baseline) {
  report.compared = true;
  report.baseline_started = baseline.run.started;
  for (auto& s : report.sections) {
    const Section* bs = nullptr;
    for (const auto& b : baseline.sections) {
      if (b.id == s.id) bs = &b;
    }
    if (!bs) continue;
    for (auto& row : s.rows) {
      const Row* br = nullptr;
      for (const auto& b : bs->rows) {
        if (b.key == row.key) br = &b;
      }
      if (!br) continue;
      for (auto& [name, fig] : row.figures) {
        auto it = br->figures.find(name);
        if (it == br->figures.end()) continue;
        fig.baseline = it->second.value;
        double change = fig.value - it->second.value;
        double spread = std::max(fig.spread, it->second.spread);
        fig.beyond_spread = std::isfinite(change) && std::abs(change) > spread + 1e-12;
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
    targets.push_back(
        {{"probe", t.probe}, {"target", t.target}, {"path", t.path}, {"rounds", t.rounds}});
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
  if (r.compared) j["baseline"] = {{"started", r.baseline_started}};
  return j;
}

std::optional<Report> FromJson(const nlohmann::json& j, std::string* error) {
  try {
    if (!j.is_object() || j.value("schema", "") != "podnet-exporter-report") {
      *error = "not a podnet-exporter report (\"schema\" is not \"podnet-exporter-report\")";
      return std::nullopt;
    }
    if (j.at("version").get<int>() != Report::kVersion) {
      *error = "report version " + j.at("version").dump() + ", this build reads version " +
               std::to_string(Report::kVersion);
      return std::nullopt;
    }
    Report r;
    const auto& run = j.at("run");
    r.run.self_name = run.at("self").at("name").get<std::string>();
    r.run.self_node = run.at("self").at("node").get<std::string>();
    r.run.self_zone = run.at("self").at("zone").get<std::string>();
    r.run.version = run.at("exporter_version").get<std::string>();
    r.run.started = run.at("started").get<std::string>();
    r.run.duration_seconds = run.at("duration_seconds").get<double>();
    r.run.price_usd_per_gb = run.at("price_usd_per_gb").get<double>();
    r.run.configured = run.at("configured").get<std::vector<std::string>>();
    r.run.interval_seconds = run.at("interval_seconds").get<std::map<std::string, double>>();
    for (const auto& t : run.at("targets")) {
      r.run.targets.push_back({t.at("probe").get<std::string>(), t.at("target").get<std::string>(),
                               t.at("path").get<std::string>(), t.at("rounds").get<int>()});
    }
    for (const auto& js : j.at("sections")) {
      Section s;
      s.id = js.at("id").get<std::string>();
      s.title = js.at("title").get<std::string>();
      s.configured = js.at("configured").get<bool>();
      s.notes = js.at("notes").get<std::vector<std::string>>();
      const Layout& layout = LayoutOf(s.id);
      for (const auto& jr : js.at("rows")) {
        Row row;
        const auto& key = jr.at("key");
        for (const auto& k : layout.key) {
          if (key.contains(k)) row.key.emplace_back(k, key.at(k).get<std::string>());
        }
        for (const auto& [name, jf] : jr.at("figures").items()) {
          Figure f = Fig(NumberOf(jf.at("value")), NumberOf(jf.at("spread")));
          if (jf.contains("baseline")) {
            f.baseline = NumberOf(jf.at("baseline"));
            f.beyond_spread = jf.at("beyond_spread").get<bool>();
          }
          row.figures[name] = f;
        }
        s.rows.push_back(std::move(row));
      }
      r.sections.push_back(std::move(s));
    }
    for (const auto& jf : j.at("failures")) {
      r.failures.push_back({jf.at("probe").get<std::string>(), jf.at("target").get<std::string>(),
                            jf.at("reason").get<std::string>()});
    }
    if (j.contains("baseline")) {
      r.compared = true;
      r.baseline_started = j.at("baseline").at("started").get<std::string>();
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    *error = std::string("not a valid report: ") + e.what();
    return std::nullopt;
  }
}

std::string ToMarkdown(const Report& r) {
  std::ostringstream out;
  out << "# podnet-exporter report\n\n";
  out << "Prober `" << r.run.self_name << "` (node `" << r.run.self_node << "`, zone `"
      << (r.run.self_zone.empty() ? "?" : r.run.self_zone) << "`), podnet-exporter "
      << r.run.version << ", started " << r.run.started << ", rounds started within "
      << Fmt(r.run.duration_seconds, 0) << " s.\n";
  if (r.compared) {
    out << "\nAgainst the baseline of " << r.baseline_started
        << ": each cell shows the change; `!` marks a change larger than the spread of either "
           "run (docs/design.md, \"One-shot report\").\n";
  }
  for (const auto& s : r.sections) {
    out << "\n## " << s.title << "\n\n";
    if (!s.configured) {
      out << "Not configured (`probes." << s.id << "` is absent).\n";
      continue;
    }
    const Layout& layout = LayoutOf(s.id);
    if (s.rows.empty()) {
      out << "No measurement recorded.\n";
    } else {
      out << "|";
      for (const auto& k : layout.key) out << " " << k << " |";
      for (const auto& c : layout.columns) out << " " << c.header << " |";
      out << "\n|";
      for (std::size_t i = 0; i < layout.key.size(); ++i) out << "---|";
      for (std::size_t i = 0; i < layout.columns.size(); ++i) out << "---:|";
      out << "\n";
      for (const auto& row : s.rows) {
        out << "|";
        for (const auto& [k, v] : row.key) out << " " << v << " |";
        for (const auto& c : layout.columns) {
          auto it = row.figures.find(c.figure);
          if (it == row.figures.end()) {
            out << " – |";
            continue;
          }
          const Figure& f = it->second;
          out << " " << Fmt(f.value * c.scale, c.decimals);
          if (f.baseline) {
            double d = (f.value - *f.baseline) * c.scale;
            out << " (" << (d >= 0 ? "+" : "") << Fmt(d, c.decimals);
            if (*f.baseline != 0 && std::isfinite(d)) {
              out << ", " << (d >= 0 ? "+" : "") << Fmt(100 * d / (*f.baseline * c.scale), 0)
                  << "%";
            }
            out << (f.beyond_spread ? " !)" : ")");
          }
          out << " |";
        }
        out << "\n";
      }
    }
    if (!s.notes.empty()) out << "\n";
    for (const auto& n : s.notes) out << "- " << n << "\n";
  }
  out << "\n## Failures\n\n";
  if (r.failures.empty()) out << "None: every configured probe got answers from every target.\n";
  for (const auto& f : r.failures) {
    out << "- " << f.probe << " → " << f.target << ": " << f.reason << "\n";
  }
  return out.str();
}

}  // namespace podnet::report
