#include "exporter/report/table.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "exporter/report/report.h"

namespace podnet::report {
namespace {

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

}  // namespace

std::string Fmt(double v, int decimals) {
  if (std::isnan(v)) return "–";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
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

}  // namespace podnet::report
