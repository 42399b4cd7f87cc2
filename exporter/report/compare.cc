// The baseline comparison (report.h: Compare, BeyondSpread, VerdictOf).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string_view>

#include "exporter/report/report.h"
#include "exporter/report/table.h"

namespace podnet::report {

namespace {

using RowKey = std::vector<std::pair<std::string, std::string>>;

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

// The verdict's line names at most this many changes or uncompared figures.
constexpr std::size_t kNamed = 3;

// "; and N more" when `n` is over kNamed, else "".
std::string AndMore(std::size_t n) {
  return n > kNamed ? "; and " + std::to_string(n - kNamed) + " more" : "";
}

// The verdict line's first sentence when the comparison is incomplete, else "".
std::string IncompleteLine(const Verdict& v) {
  if (!v.uncompared.empty()) {
    std::string line = "Incomplete comparison: " + std::to_string(v.uncompared.size()) +
                       " could not be compared (";
    for (std::size_t i = 0; i < v.uncompared.size() && i < kNamed; ++i) {
      line += (i ? "; " : "") + v.uncompared[i];
    }
    return line + AndMore(v.uncompared.size()) + "). ";
  }
  return v.figures == 0 ? "Incomplete comparison: no figure on either side. " : "";
}

// "RTT cross_zone icmp p50 ms 0.550 → 0.776 (+41 %)": one change at its column's precision.
std::string ChangeText(const Change& c) {
  const Column* col = nullptr;
  for (const auto& k : LayoutOf(c.section).columns) {
    if (c.figure == k.figure) col = &k;
  }
  std::string out = RowName(c.section, c.key) + " " + col->header + " " +
                    Fmt(c.baseline * col->scale, col->decimals) + " → " +
                    Fmt(c.value * col->scale, col->decimals);
  if (c.baseline != 0 && std::isfinite(c.value)) {  // no "+Inf %" for a +Inf max
    double pct = 100 * (c.value - c.baseline) / c.baseline;
    out += " (" + std::string(pct >= 0 ? "+" : "") + Fmt(pct, 0) + " %)";
  }
  return out;
}

// The verdict line's sentence on the changes (v.changed sorted, v.figures counted).
std::string ChangesLine(const Verdict& v) {
  if (v.changed.empty()) {
    return "No change beyond the run-to-run spread in " + std::to_string(v.figures) + " figures.";
  }
  std::string line = std::to_string(v.changed.size()) + " of " + std::to_string(v.figures) +
                     " figures changed beyond their run-to-run spread: ";
  for (std::size_t i = 0; i < v.changed.size() && i < kNamed; ++i) {
    line += (i ? "; " : "") + ChangeText(v.changed[i]);
  }
  return line + AndMore(v.changed.size()) + ".";
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
  v.uncompared = r.uncompared;
  v.complete = v.uncompared.empty() && v.figures > 0;
  v.line = IncompleteLine(v) + ChangesLine(v);
  return v;
}

}  // namespace podnet::report
