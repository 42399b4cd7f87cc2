#include "exporter/metrics/exposition.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/testing/metric_families.h"

namespace podnet::metrics {
namespace {

// The reference: the library's serializer, then the one stated difference (`le` shortest).
std::string Reference(const std::vector<prometheus::MetricFamily>& families) {
  std::ostringstream ss;
  prometheus::TextSerializer().Serialize(ss, families);
  std::string out;
  RewriteLe(ss.str(), out);
  return out;
}

std::string Written(const std::vector<prometheus::MetricFamily>& families, std::size_t chunk,
                    int* pieces = nullptr) {
  std::string out;
  int n = 0;
  TextWriter w(
      [&](std::string_view piece) {
        EXPECT_FALSE(piece.empty());
        EXPECT_EQ(piece.back(), '\n') << "a piece must end with a complete line";
        out.append(piece);
        ++n;
      },
      chunk);
  w.Write(families);
  if (pieces) *pieces = n;
  return out;
}

std::vector<prometheus::MetricFamily> Fixture() { return testing::EveryMetricType(); }

TEST(ExpositionTest, ByteIdenticalToTextSerializerExceptLe) {
  auto families = Fixture();
  std::string want = Reference(families);
  ASSERT_NE(want.find("le=\"8e-05\""), std::string::npos) << "the fixture exercises RewriteLe";
  EXPECT_EQ(Written(families, 64 * 1024), want);
  // Tiny pieces: every line is handed on whole, and the text is the same.
  int pieces = 0;
  EXPECT_EQ(Written(families, 1, &pieces), want);
  // A 1-byte chunk: one piece per sample line (with the # lines before it).
  EXPECT_EQ(pieces, std::count(want.begin(), want.end(), '\n') -
                        2 * static_cast<long>(families.size()) + 1);  // one family has no HELP
}

TEST(ExpositionTest, TheStatedDifferenceIsLeOnly) {
  auto families = Fixture();
  std::ostringstream ss;
  prometheus::TextSerializer().Serialize(ss, families);
  std::string library = ss.str(), ours = Written(families, 64 * 1024);
  // Line by line: every line differing is a _bucket line whose le text differs and reads back
  // to the same double.
  std::istringstream a(library), b(ours);
  std::string la, lb;
  int differing = 0;
  while (std::getline(a, la) && std::getline(b, lb)) {
    if (la == lb) continue;
    ++differing;
    auto le = [](const std::string& line) {
      auto at = line.find("le=\"") + 4;
      return line.substr(at, line.find('"', at) - at);
    };
    ASSERT_NE(la.find("_bucket{"), std::string::npos) << la;
    EXPECT_EQ(std::stod(le(la)), std::stod(le(lb))) << la << "\n" << lb;
    EXPECT_LT(le(lb).size(), le(la).size());
  }
  EXPECT_FALSE(std::getline(a, la) || std::getline(b, lb)) << "same number of lines";
  EXPECT_GT(differing, 0);
}

TEST(ExpositionTest, AppendLeIsShortestAndRoundTrips) {
  for (double v : {1e-5, 8e-5, 0.0006, 0.001, 0.1, 1.0, 2.5, 10.0, 1e16, 1.5e-9, 123456.0}) {
    std::string s;
    AppendLe(v, s);
    EXPECT_EQ(std::stod(s), v) << s;
  }
  std::string s;
  AppendLe(8e-5, s);
  s += ' ';
  AppendLe(0.0006, s);
  s += ' ';
  AppendLe(1.0, s);
  s += ' ';
  AppendLe(std::numeric_limits<double>::infinity(), s);
  EXPECT_EQ(s, "8e-05 0.0006 1 +Inf");
}

}  // namespace
}  // namespace podnet::metrics
