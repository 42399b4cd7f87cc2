// The report's JSON (report.h: ToJson, FromJson): writing it, and reading it back as hostile
// input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string_view>

#include "exporter/report/report.h"
#include "exporter/report/table.h"
#include "exporter/topology/safe_text.h"

namespace podnet::report {
namespace {

using json = nlohmann::json;

// ---- Writing (ToJson) ----------------------------------------------------------------------

// A number as JSON: null for NaN (nothing measured), "+Inf" / "-Inf" (JSON has no infinity).
json Number(double v) {
  if (std::isnan(v)) return nullptr;
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return v;
}

json RunJson(const RunInfo& run) {
  json out = {{"self", {{"name", run.self_name}, {"node", run.self_node}, {"zone", run.self_zone}}},
              {"exporter_version", run.version},
              {"started", run.started},
              {"duration_seconds", run.duration_seconds},
              {"price_usd_per_gb", run.price_usd_per_gb},
              {"configured", run.configured},
              {"interval_seconds", run.interval_seconds}};
  auto& targets = out["targets"] = json::array();
  for (const auto& t : run.targets) {
    targets.push_back({{"probe", t.probe},
                       {"target", t.target},
                       {"path_class", t.path_class},
                       {"rounds", t.rounds}});
  }
  return out;
}

json KeyJson(const std::vector<std::pair<std::string, std::string>>& key) {
  json out = json::object();
  for (const auto& [k, v] : key) out[k] = v;
  return out;
}

json SectionJson(const Section& s) {
  json out{{"id", s.id},
           {"title", s.title},
           {"configured", s.configured},
           {"notes", s.notes},
           {"rows", json::array()}};
  for (const auto& row : s.rows) {
    json figs = json::object();
    for (const auto& [name, f] : row.figures) {
      json jf{{"value", Number(f.value)}, {"spread", Number(f.spread)}};
      if (f.baseline) {
        jf["baseline"] = Number(*f.baseline);
        jf["beyond_spread"] = f.beyond_spread;
      }
      figs[name] = std::move(jf);
    }
    out["rows"].push_back({{"key", KeyJson(row.key)}, {"figures", figs}});
  }
  return out;
}

json VerdictJson(const Verdict& v) {
  json out{{"figures", v.figures},
           {"complete", v.complete},
           {"summary", v.line},
           {"changed", json::array()},
           {"uncompared", v.uncompared}};
  for (const auto& c : v.changed) {
    out["changed"].push_back({{"section", c.section},
                              {"key", KeyJson(c.key)},
                              {"figure", c.figure},
                              {"value", Number(c.value)},
                              {"baseline", Number(c.baseline)},
                              {"spread", Number(c.spread)}});
  }
  return out;
}

// ---- Reading a report back (FromJson): every value checked against its meaning -----------
//
// A report read with --input or --baseline is a file anyone could have written: a value that
// cannot be what its field means (a negative count, a string where a number belongs, a loss
// over 100 %) is refused with its JSON path, never printed as a figure.

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
  Figure f;
  f.value = ReadNumber(At(jf, path, "value"), Member(path, "value"), m);
  f.spread = ReadNumber(At(jf, path, "spread"), Member(path, "spread"), SpreadMeaning(m));
  if (jf.contains("baseline")) {
    f.baseline = ReadNumber(jf.at("baseline"), Member(path, "baseline"), m);
    f.beyond_spread = ReadBool(At(jf, path, "beyond_spread"), Member(path, "beyond_spread"));
  }
  return f;
}

RunInfo ReadRun(const json& run) {
  RunInfo out;
  const json& self = At(run, "run", "self");
  out.self_name = ReadText(At(self, "run.self", "name"), "run.self.name");
  out.self_node = ReadText(At(self, "run.self", "node"), "run.self.node");
  out.self_zone = ReadText(At(self, "run.self", "zone"), "run.self.zone");
  out.version = ReadText(At(run, "run", "exporter_version"), "run.exporter_version");
  out.started = ReadText(At(run, "run", "started"), "run.started");
  out.duration_seconds =
      ReadNumber(At(run, "run", "duration_seconds"), "run.duration_seconds", {.what = "seconds"});
  out.price_usd_per_gb = ReadNumber(At(run, "run", "price_usd_per_gb"), "run.price_usd_per_gb",
                                    {.what = "US dollars per GB"});
  const json& configured = ReadArray(At(run, "run", "configured"), "run.configured");
  for (std::size_t i = 0; i < configured.size(); ++i) {
    out.configured.push_back(ReadText(configured[i], Element("run.configured", i)));
  }
  const json& intervals = At(run, "run", "interval_seconds");
  if (!intervals.is_object()) {
    throw Invalid{"run.interval_seconds", Shown(intervals) + " is not an object"};
  }
  for (const auto& [kind, v] : intervals.items()) {
    std::string path = Member("run.interval_seconds", kind);
    out.interval_seconds[ReadText(kind, path)] = ReadNumber(v, path, {.what = "seconds"});
  }
  const json& targets = ReadArray(At(run, "run", "targets"), "run.targets");
  for (std::size_t i = 0; i < targets.size(); ++i) {
    std::string path = Element("run.targets", i);
    const json& t = targets[i];
    out.targets.push_back({ReadText(At(t, path, "probe"), Member(path, "probe")),
                           ReadText(At(t, path, "target"), Member(path, "target")),
                           ReadText(At(t, path, "path_class"), Member(path, "path_class")),
                           ReadCount(At(t, path, "rounds"), Member(path, "rounds"))});
  }
  return out;
}

// One row at `path`; its key holds only the section's key labels (`layout`), in their order.
Row ReadRow(const json& jr, const std::string& path, const Layout& layout) {
  Row row;
  const json& key = At(jr, path, "key");
  for (const auto& name : layout.key) {
    if (key.is_object() && key.contains(name)) {
      row.key.emplace_back(name, ReadText(key.at(name), Member(Member(path, "key"), name)));
    }
  }
  const json& figures = At(jr, path, "figures");
  if (!figures.is_object()) {
    throw Invalid{Member(path, "figures"), Shown(figures) + " is not an object"};
  }
  for (const auto& [name, jf] : figures.items()) {
    std::string fig_path = Member(Member(path, "figures"), name);
    row.figures[ReadText(name, fig_path)] = ReadFigure(jf, fig_path, name);
  }
  return row;
}

Section ReadSection(const json& js, const std::string& path) {
  Section s;
  s.id = ReadText(At(js, path, "id"), Member(path, "id"));
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
    Row row = ReadRow(rows[k], row_path, layout);
    auto [first, fresh] = seen.emplace(row.key, k);
    if (!fresh) {
      throw Invalid{Member(row_path, "key"),
                    "repeats the key of " + Element(Member(path, "rows"), first->second)};
    }
    s.rows.push_back(std::move(row));
  }
  return s;
}

Report ReadBody(const json& j) {
  Report r;
  r.run = ReadRun(At(j, "", "run"));
  const json& sections = ReadArray(At(j, "", "sections"), "sections");
  // A section id seen twice would be printed twice and compared once (the last copy): refused.
  std::map<std::string, std::size_t> ids;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    std::string path = Element("sections", i);
    std::string id = ReadText(At(sections[i], path, "id"), Member(path, "id"));
    if (auto [first, fresh] = ids.emplace(id, i); !fresh) {
      throw Invalid{Member(path, "id"), "repeats the id of " + Element("sections", first->second)};
    }
    r.sections.push_back(ReadSection(sections[i], path));
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

json ToJson(const Report& r) {
  json j;
  j["schema"] = "podnet-exporter-report";
  j["version"] = Report::kVersion;
  j["run"] = RunJson(r.run);
  auto& sections = j["sections"] = json::array();
  for (const auto& s : r.sections) sections.push_back(SectionJson(s));
  auto& failures = j["failures"] = json::array();
  for (const auto& f : r.failures) {
    failures.push_back({{"probe", f.probe}, {"target", f.target}, {"reason", f.reason}});
  }
  if (r.compared) {
    j["baseline"] = {{"started", r.baseline_started}};
    j["verdict"] = VerdictJson(VerdictOf(r));
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

}  // namespace podnet::report
