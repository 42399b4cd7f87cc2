#pragma once

// How each section is shown: its key labels and its columns (which figure, the header, the
// unit's scale and the decimals), read by TableOf (the Markdown and HTML tables), the verdict's
// line (compare.cc) and FromJson (which key labels a row may have). Internal to the report
// module.

#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace podnet::report {

/// A figure's value when nothing was measured (null in JSON, "–" in a cell), and a spread that
/// no change exceeds (a figure shown, never marked).
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

struct Column {
  const char* figure;  // its name in Row::figures
  const char* header;  // "p50 ms"
  double scale;        // figure × scale is what the cell shows (seconds × 1e3: ms)
  int decimals;
};

struct Layout {
  std::vector<std::string> key;  // the key labels, in the table's order
  std::vector<Column> columns;
};

/// The layout of section `id` (Section::id); a layout without key or columns for an id this
/// build does not know.
const Layout& LayoutOf(const std::string& id);

/// `v` with `decimals` decimals; "–" for NaN (nothing measured), "+Inf" / "-Inf".
std::string Fmt(double v, int decimals);

/// The percentile figures and their q (AddLatency writes them; a cell shows "n<N" below
/// MinSamplesFor(q)).
inline constexpr std::pair<const char*, double> kPercentiles[] = {
    {"p50_seconds", 0.5}, {"p90_seconds", 0.9}, {"p99_seconds", 0.99}};

}  // namespace podnet::report
