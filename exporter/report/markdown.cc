// The report as Markdown (report.h: ToMarkdown).
#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <string_view>

#include "exporter/report/report.h"
#include "exporter/report/table.h"

namespace podnet::report {
namespace {

// Every string from outside (a name from Kubernetes or the configuration, or any
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
