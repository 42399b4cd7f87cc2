#include "exporter/report/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

namespace podnet::report {
namespace {

// The ladder's order of path classes; others after them.
int PathRank(const std::string& path_class) {
  static const std::map<std::string, int> kRank = {
      {"same_node", 0}, {"same_zone", 1}, {"cross_zone", 2}, {"unknown", 3}};
  auto it = kRank.find(path_class);
  return it == kRank.end() ? 4 : it->second;
}

std::string KeyValue(const Row& row, const std::string& name) {
  for (const auto& [k, v] : row.key) {
    if (k == name) return v;
  }
  return "";
}

// A figure's value as ToJson spells it (shortest round trip; null for NaN).
std::string JsonValue(double v) {
  if (std::isnan(v)) return "null";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return nlohmann::json(v).dump();
}

std::string Ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", seconds * 1e3);
  return buf;
}

// `s` cut to `max` characters (UTF-8 code points) with "…": what fits a picture's label. The
// whole name stays in the element's <title> (a tooltip) and in the tables.
std::string Shorter(const std::string& s, std::size_t max) {
  std::size_t chars = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;  // a continuation byte
    if (++chars > max) return s.substr(0, i) + "…";
  }
  return s;
}

// A <text> label: escaped, cut to `max` characters, the whole of it as its <title>.
std::string Label(const std::string& s, std::size_t max) {
  return "<title>" + HtmlEscape(s) + "</title>" + HtmlEscape(Shorter(s, max));
}

// A number for an SVG coordinate.
std::string Px(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}

// The row's key as a JSON object, escaped for an attribute.
std::string KeyAttribute(const Row& row) {
  nlohmann::json key = nlohmann::json::object();
  for (const auto& [k, v] : row.key) key[k] = v;
  return HtmlEscape(key.dump());
}

double Value(const Row& row, const std::string& figure) {
  auto it = row.figures.find(figure);
  return it == row.figures.end() ? std::nan("") : it->second.value;
}

// The text of a percentile in a picture: ms, or "n<N" when the samples cannot carry it.
std::string PercentileText(const Row& row, const std::string& figure, double q) {
  double v = Value(row, figure);
  if (!std::isnan(v)) return Ms(v);
  double n = Value(row, "samples");
  if (!std::isnan(n) && n < MinSamplesFor(q)) return "n<" + std::to_string(MinSamplesFor(q));
  return "–";
}

// A <text> that shows one figure, with where it is in the JSON.
std::string FigureText(const Section& s, const Row& row, const std::string& figure, double q,
                       double x, double y, const std::string& cls) {
  return "<text class=\"" + cls + "\" x=\"" + Px(x) + "\" y=\"" + Px(y) + "\" data-section=\"" +
         HtmlEscape(s.id) + "\" data-key=\"" + KeyAttribute(row) + "\" data-figure=\"" + figure +
         "\" data-value=\"" + JsonValue(Value(row, figure)) + "\">" +
         HtmlEscape(PercentileText(row, figure, q)) + "</text>";
}

// One latency section as a ladder: a row per table row, a bar from 0 to p50 and a whisker
// from p50 to p90 on a linear axis up to the largest p90 (or p50) of the section.
std::string Ladder(const Section& s) {
  std::vector<const Row*> rows;
  for (const auto& row : s.rows) rows.push_back(&row);
  std::stable_sort(rows.begin(), rows.end(), [](const Row* a, const Row* b) {
    return PathRank(KeyValue(*a, "path_class")) < PathRank(KeyValue(*b, "path_class"));
  });
  double top = 0;
  for (const Row* row : rows) {
    for (const char* f : {"p50_seconds", "p90_seconds"}) {
      double v = Value(*row, f);
      if (std::isfinite(v)) top = std::max(top, v);
    }
  }
  constexpr double kLabel = 230, kPlot = 380, kColumn = 80, kRow = 28, kHead = 24;
  const double width = kLabel + kPlot + 2 * kColumn + 10;
  const double height = kHead + kRow * static_cast<double>(rows.size()) + 30;
  auto x_of = [&](double v) { return kLabel + (top > 0 ? v / top * kPlot : 0); };
  std::ostringstream svg;
  svg << "<figure><figcaption>" << HtmlEscape(s.title) << ": p50 (bar) and p90 (whisker), ms"
      << "</figcaption><svg class=\"ladder\" id=\"ladder-" << HtmlEscape(s.id) << "\" width=\""
      << Px(width) << "\" height=\"" << Px(height) << "\" viewBox=\"0 0 " << Px(width) << " "
      << Px(height) << "\" role=\"img\" aria-label=\"" << HtmlEscape(s.title) << "\">";
  double cx = kLabel + kPlot + 10;
  svg << "<text class=\"head\" x=\"" << Px(cx) << "\" y=\"16\">p50 ms</text>"
      << "<text class=\"head\" x=\"" << Px(cx + kColumn) << "\" y=\"16\">p90 ms</text>";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& row = *rows[i];
    double y = kHead + kRow * static_cast<double>(i);
    std::string label;
    for (const auto& [k, v] : row.key) label += (label.empty() ? "" : " ") + v;
    svg << "<text class=\"label\" x=\"4\" y=\"" << Px(y + 17) << "\">" << Label(label, 30)
        << "</text>";
    double p50 = Value(row, "p50_seconds"), p90 = Value(row, "p90_seconds");
    if (std::isfinite(p50)) {
      svg << "<rect class=\"p50 " << HtmlEscape(KeyValue(row, "path_class")) << "\" x=\""
          << Px(kLabel) << "\" y=\"" << Px(y + 5) << "\" width=\""
          << Px(std::max(1.0, x_of(p50) - kLabel)) << "\" height=\"16\"/>";
    }
    if (std::isfinite(p50) && std::isfinite(p90)) {
      svg << "<line class=\"p90\" x1=\"" << Px(x_of(p50)) << "\" x2=\"" << Px(x_of(p90))
          << "\" y1=\"" << Px(y + 13) << "\" y2=\"" << Px(y + 13) << "\"/>"
          << "<line class=\"p90\" x1=\"" << Px(x_of(p90)) << "\" x2=\"" << Px(x_of(p90))
          << "\" y1=\"" << Px(y + 7) << "\" y2=\"" << Px(y + 19) << "\"/>";
    }
    svg << FigureText(s, row, "p50_seconds", 0.5, cx, y + 17, "value")
        << FigureText(s, row, "p90_seconds", 0.9, cx + kColumn, y + 17, "value");
  }
  double axis = kHead + kRow * static_cast<double>(rows.size()) + 6;
  svg << "<line class=\"axis\" x1=\"" << Px(kLabel) << "\" x2=\"" << Px(kLabel + kPlot)
      << "\" y1=\"" << Px(axis) << "\" y2=\"" << Px(axis) << "\"/>"
      << "<text class=\"tick\" x=\"" << Px(kLabel) << "\" y=\"" << Px(axis + 16) << "\">0</text>"
      << "<text class=\"tick end\" x=\"" << Px(kLabel + kPlot) << "\" y=\"" << Px(axis + 16)
      << "\">" << Ms(top) << " ms</text></svg></figure>\n";
  return svg.str();
}

// The zone matrix: a cell per (source zone, peer zone) of the "zones" section, its RTT p50 as
// text and as shade (darker is slower, relative to the slowest cell).
std::string ZoneMatrix(const Section& s) {
  std::set<std::string> sources, peers;
  std::map<std::pair<std::string, std::string>, const Row*> cells;
  double top = 0;
  for (const auto& row : s.rows) {
    std::string from = KeyValue(row, "source_zone"), to = KeyValue(row, "peer_zone");
    sources.insert(from);
    peers.insert(to);
    cells[{from, to}] = &row;
    double p50 = Value(row, "p50_seconds");
    if (std::isfinite(p50)) top = std::max(top, p50);
  }
  constexpr double kLabel = 150, kCell = 130, kHeight = 44, kHead = 30;
  const double width = kLabel + kCell * static_cast<double>(peers.size()) + 10;
  const double height = kHead + kHeight * static_cast<double>(sources.size()) + 10;
  std::ostringstream svg;
  svg << "<figure><figcaption>RTT p50 by zone pair, ms (rows: this Pod's zone; columns: the "
         "peer's zone; darker is slower)</figcaption><svg class=\"matrix\" id=\"zone-matrix\" "
         "width=\""
      << Px(width) << "\" height=\"" << Px(height) << "\" viewBox=\"0 0 " << Px(width) << " "
      << Px(height) << "\" role=\"img\" aria-label=\"RTT p50 by zone pair\">";
  auto shown = [](const std::string& zone) { return Label(zone.empty() ? "?" : zone, 14); };
  std::size_t c = 0;
  for (const auto& to : peers) {
    svg << "<text class=\"head\" x=\"" << Px(kLabel + kCell * (static_cast<double>(c++) + 0.5))
        << "\" y=\"20\" text-anchor=\"middle\">" << shown(to) << "</text>";
  }
  std::size_t r = 0;
  for (const auto& from : sources) {
    double y = kHead + kHeight * static_cast<double>(r++);
    svg << "<text class=\"label\" x=\"4\" y=\"" << Px(y + 27) << "\">" << shown(from)
        << " →</text>";
    c = 0;
    for (const auto& to : peers) {
      double x = kLabel + kCell * static_cast<double>(c++);
      auto it = cells.find({from, to});
      if (it == cells.end()) {
        svg << "<rect class=\"empty\" x=\"" << Px(x + 2) << "\" y=\"" << Px(y + 2) << "\" width=\""
            << Px(kCell - 4) << "\" height=\"" << Px(kHeight - 4) << "\"/>";
        continue;
      }
      double p50 = Value(*it->second, "p50_seconds");
      // Lightness 92 % (fastest possible) to 38 % (the slowest cell).
      double share = std::isfinite(p50) && top > 0 ? p50 / top : 0;
      double lightness = 92 - 54 * share;
      char fill[48];
      std::snprintf(fill, sizeof fill, "hsl(210,65%%,%.0f%%)", lightness);
      svg << "<rect class=\"cell\" x=\"" << Px(x + 2) << "\" y=\"" << Px(y + 2) << "\" width=\""
          << Px(kCell - 4) << "\" height=\"" << Px(kHeight - 4) << "\" fill=\"" << fill << "\"/>"
          << FigureText(s, *it->second, "p50_seconds", 0.5, x + kCell / 2, y + 27,
                        lightness < 60 ? "value dark" : "value");
    }
  }
  svg << "</svg></figure>\n";
  return svg.str();
}

constexpr const char* kStyle = R"(
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px;
       color: #1b1f24; background: #fff; max-width: 1100px; }
h1 { font-size: 22px; margin: 0 0 8px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.verdict { font-size: 16px; padding: 10px 14px; border-radius: 6px; border: 1px solid; }
.verdict.changed { background: #fff4e5; border-color: #e8a33d; }
.verdict.same { background: #eaf6ec; border-color: #4fa463; }
.verdict.incomplete { background: #fdecea; border-color: #d9534f; }
figure { margin: 8px 0 16px; } figcaption { font-weight: 600; margin-bottom: 4px; }
svg text { font: 13px system-ui, sans-serif; fill: #1b1f24; }
svg text.value { font-variant-numeric: tabular-nums; }
svg text.head { font-weight: 600; } svg text.tick.end { text-anchor: end; }
svg .matrix text.value, svg.matrix text.value { text-anchor: middle; }
svg text.value.dark { fill: #fff; }
rect.p50 { fill: #7aa6d6; } rect.p50.same_node { fill: #9cc79c; }
rect.p50.same_zone { fill: #7aa6d6; } rect.p50.cross_zone { fill: #d98b5f; }
line.p90 { stroke: #333; stroke-width: 2; } line.axis { stroke: #999; }
rect.empty { fill: #f1f1f1; }
table { border-collapse: collapse; margin: 6px 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; } th { background: #f6f8fa; }
td.n { text-align: right; } td.changed { background: #fff4e5; font-weight: 600; }
ul.notes { color: #57606a; font-size: 12px; }
)";

void WriteTable(std::ostringstream& out, const Section& s) {
  report::Table t = TableOf(s);
  if (t.rows.empty()) {
    out << "<p>No measurement recorded.</p>\n";
    return;
  }
  out << "<table data-section=\"" << HtmlEscape(s.id) << "\"><thead><tr>";
  for (const auto& h : t.header) out << "<th>" << HtmlEscape(h) << "</th>";
  out << "</tr></thead><tbody>\n";
  for (const auto& row : t.rows) {
    out << "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) {
      bool changed = row[i].find(" !)") != std::string::npos;
      out << "<td"
          << (i < t.key_columns ? ""
              : changed         ? " class=\"n changed\""
                                : " class=\"n\"")
          << ">" << HtmlEscape(row[i]) << "</td>";
    }
    out << "</tr>\n";
  }
  out << "</tbody></table>\n";
}

}  // namespace

std::string HtmlEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// The page's head, the verdict (after Compare()) and the line on the prober and the run.
void WriteHead(std::ostringstream& out, const Report& r) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
         "style-src 'unsafe-inline'\">"
         "<meta name=\"viewport\" content=\"width=device-width\">"
         "<title>podnet-exporter report: "
      << HtmlEscape(r.run.self_name) << ", " << HtmlEscape(r.run.started) << "</title><style>"
      << kStyle << "</style></head><body>\n<h1>podnet-exporter report</h1>\n";
  if (r.compared) {
    Verdict v = VerdictOf(r);
    // Not green unless complete: an incomplete "no change" is what the gate refuses.
    out << "<p class=\"verdict "
        << (!v.changed.empty() ? "changed"
            : v.complete       ? "same"
                               : "incomplete")
        << "\" id=\"verdict\" data-changed=\"" << v.changed.size() << "\" data-figures=\""
        << v.figures << "\" data-complete=\"" << (v.complete ? "true" : "false")
        << "\"><b>Verdict:</b> " << HtmlEscape(v.line) << "</p>\n";
  }
  out << "<p>Prober <code>" << HtmlEscape(r.run.self_name) << "</code> (node <code>"
      << HtmlEscape(r.run.self_node) << "</code>, zone <code>"
      << HtmlEscape(r.run.self_zone.empty() ? "?" : r.run.self_zone) << "</code>), podnet-exporter "
      << HtmlEscape(r.run.version) << ", started " << HtmlEscape(r.run.started)
      << ", rounds started within " << Px(r.run.duration_seconds) << " s.";
  if (r.compared) {
    out << " Against the baseline of " << HtmlEscape(r.baseline_started)
        << ": each cell shows the change; <b>!</b> (shaded) marks a change larger than the "
           "spread of either run.";
  }
  out << "</p>\n";
}

// The latency ladder and the zone matrix: the figures the tables below hold, drawn.
void WriteFigures(std::ostringstream& out, const Report& r) {
  out << "<h2>Latency ladder</h2>\n";
  bool any = false;
  for (const auto& s : r.sections) {
    if ((s.id == "rtt" || s.id == "http" || s.id == "grpc") && s.configured && !s.rows.empty()) {
      out << Ladder(s);
      any = true;
    }
  }
  if (!any) out << "<p>No latency measured.</p>\n";
  out << "<h2>Zone matrix</h2>\n";
  const Section* zones = nullptr;
  for (const auto& s : r.sections) {
    if (s.id == "zones") zones = &s;
  }
  if (zones && zones->configured && !zones->rows.empty()) {
    out << ZoneMatrix(*zones);
  } else {
    out << "<p>No RTT by zone pair in this report.</p>\n";
  }
}

// Each section's table and notes, then the failures.
void WriteSections(std::ostringstream& out, const Report& r) {
  for (const auto& s : r.sections) {
    out << "<h2>" << HtmlEscape(s.title) << "</h2>\n";
    if (!s.configured) {
      out << "<p>Not configured (<code>probes." << HtmlEscape(s.id) << "</code> is absent).</p>\n";
      continue;
    }
    WriteTable(out, s);
    if (!s.notes.empty()) {
      out << "<ul class=\"notes\">";
      for (const auto& n : s.notes) out << "<li>" << HtmlEscape(n) << "</li>";
      out << "</ul>\n";
    }
  }
  out << "<h2>Failures</h2>\n";
  if (r.failures.empty()) {
    out << "<p>None: every configured probe got answers from every target.</p>\n";
  } else {
    out << "<ul id=\"failures\">";
    for (const auto& f : r.failures) {
      out << "<li>" << HtmlEscape(f.probe) << " → " << HtmlEscape(f.target) << ": "
          << HtmlEscape(f.reason) << "</li>";
    }
    out << "</ul>\n";
  }
}

}  // namespace

std::string ToHtml(const Report& r) {
  std::ostringstream out;
  WriteHead(out, r);
  WriteFigures(out, r);
  WriteSections(out, r);
  out << "</body></html>\n";
  return out.str();
}

}  // namespace podnet::report
