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

// Every metric type, through a real registry, with edge values: NaN, infinities, negative,
// huge and tiny numbers, integers past 2^53, label values needing escapes, an empty help,
// the exporter's latency buckets (whose %.16g text is long), explicit timestamps.
std::vector<prometheus::MetricFamily> Fixture() {
  prometheus::Registry registry;
  auto& c = prometheus::BuildCounter().Name("fx_total").Help("A counter.").Register(registry);
  c.Add({{"peer", "a\"b\\c\nd"}, {"path_class", "same_node"}}).Increment(3);
  c.Add({}).Increment(1e20);
  c.Add({{"x", ""}}).Increment(0.1 + 0.2);
  auto& g = prometheus::BuildGauge().Name("fx_gauge").Register(registry);  // no help
  g.Add({{"k", "nan"}}).Set(std::numeric_limits<double>::quiet_NaN());
  g.Add({{"k", "+inf"}}).Set(std::numeric_limits<double>::infinity());
  g.Add({{"k", "-inf"}}).Set(-std::numeric_limits<double>::infinity());
  g.Add({{"k", "neg"}}).Set(-1.5e-7);
  g.Add({{"k", "big"}}).Set(9007199254740993.0);
  g.Add({{"k", "unicode"}}).Set(1234567.891);
  auto& h = prometheus::BuildHistogram().Name("fx_seconds").Help("Latency.").Register(registry);
  // Bounds whose shortest text is shorter than the library's 17-digit one (RewriteLe).
  const prometheus::Histogram::BucketBoundaries bounds = {
      5e-06, 6e-06,  8e-06,  1e-05,  1.25e-05, 1.5e-05, 2e-05, 3e-05, 6e-05,
      8e-05, 0.0001, 0.0003, 0.0006, 0.0125,   0.3,     0.6,   1};
  auto& lat = h.Add({{"path_class", "cross_zone"}}, bounds);
  for (double v : {5e-6, 8e-5, 3.3e-4, 0.0006, 0.0125, 0.2, 7.0}) lat.Observe(v);
  h.Add({{"path_class", "empty"}}, prometheus::Histogram::BucketBoundaries{0.1, 1, 10});
  auto& s = prometheus::BuildSummary().Name("fx_summary").Help("S.").Register(registry);
  auto& sm = s.Add({}, prometheus::Summary::Quantiles{{0.5, 0.05}, {0.99, 0.001}});
  for (int i = 1; i <= 100; ++i) sm.Observe(i * 0.01);
  auto families = registry.Collect();
  // Timestamps and an untyped family exist only in hand-made families.
  prometheus::MetricFamily u;
  u.name = "fx_untyped";
  u.help = "Untyped, with a timestamp.";
  u.type = prometheus::MetricType::Untyped;
  prometheus::ClientMetric m;
  m.untyped.value = 42;
  m.timestamp_ms = 1700000000123;
  m.label.push_back({"a", "1"});
  u.metric.push_back(m);
  families.push_back(u);
  return families;
}

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
