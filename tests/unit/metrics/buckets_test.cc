#include "exporter/metrics/buckets.h"

#include <gtest/gtest.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "exporter/metrics/metrics.h"

namespace podnet::metrics {
namespace {

TEST(LatencyBucketsTest, StrictlyIncreasingAndPositive) {
  const auto& b = LatencyBuckets();
  ASSERT_FALSE(b.empty());
  EXPECT_GT(b.front(), 0.0);
  for (std::size_t i = 1; i < b.size(); ++i) {
    EXPECT_LT(b[i - 1], b[i]) << "at " << i;
  }
}

TEST(LatencyBucketsTest, CoverTenMicrosecondsToOneSecond) {
  const auto& b = LatencyBuckets();
  EXPECT_DOUBLE_EQ(b.front(), 10e-6);
  EXPECT_DOUBLE_EQ(b.back(), 1.0);
  EXPECT_EQ(b.size(), 31u);  // 34 series a histogram: the series budget counts on it
}

TEST(LatencyBucketsTest, AdjacentBoundsWithinFiftyPercent) {
  // docs/design.md, "Metrics: peer labels and buckets": adjacent bounds differ by at most 50 %.
  const auto& b = LatencyBuckets();
  for (std::size_t i = 1; i < b.size(); ++i) {
    EXPECT_LE(b[i] / b[i - 1], 1.5 + 1e-12) << b[i - 1] << " -> " << b[i];
  }
  // 5 decades at no more than 50 % per step need at least log(10^5)/log(1.5) ≈ 28.4 steps.
  EXPECT_GE(b.size() - 1, 29u);
}

TEST(LatencyBucketsTest, DnsBucketsNameHowManyResolverTriesTimedOut) {
  const auto& dns = DnsLatencyBuckets();
  for (std::size_t i = 1; i < dns.size(); ++i) EXPECT_LT(dns[i - 1], dns[i]) << "at " << i;
  EXPECT_DOUBLE_EQ(dns.front(), 100e-6);
  // A cluster cache's answer (0.1-5 ms) is read from at least 4 buckets.
  auto bounds_in = [&](double lo, double hi) {
    return std::count_if(dns.begin(), dns.end(), [&](double v) { return v > lo && v < hi; });
  };
  EXPECT_GE(bounds_in(100e-6, 5e-3), 4);
  // One glibc or musl try times out after RES_TIMEOUT = 5 s, two after 10 s: 5 and 10 are
  // bounds, so a lookup that lost one try lands in (5, 10], one that lost two above 10.
  EXPECT_EQ(std::count(dns.begin(), dns.end(), 5.0), 1);
  EXPECT_EQ(std::count(dns.begin(), dns.end(), 10.0), 1);
  EXPECT_GE(dns.back(), 30.0);
  EXPECT_EQ(dns.size() + 3, 19u);  // the series budget counts on it
  for (double v : dns) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2e", v);
    EXPECT_EQ(std::strtod(text, nullptr), v) << text;
  }
}

TEST(LatencyBucketsTest, SameVectorEveryCall) { EXPECT_EQ(&LatencyBuckets(), &LatencyBuckets()); }

TEST(LatencyBucketsTest, EveryBoundIsAShortDecimal) {
  // Each bound must be exactly the double nearest a decimal with three significant digits, so
  // that it is written as "1.25e-05" and not "1.2500000000000002e-05" in the `le` label.
  for (double v : LatencyBuckets()) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2e", v);
    EXPECT_EQ(std::strtod(text, nullptr), v) << text;
  }
}

// The `le` label values of every bucket line of `name` in a text exposition.
std::vector<std::string> LeValues(const std::string& exposition, const std::string& name) {
  std::vector<std::string> out;
  std::regex re(name + R"(_bucket\{[^}]*le="([^"]*)\"[^}]*\} )");
  for (std::sregex_iterator it(exposition.begin(), exposition.end(), re), end; it != end; ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

TEST(LatencyBucketsTest, SerialisedAsShortDecimals) {
  Metrics m;  // its Serialize is what /metrics returns
  auto& h = prometheus::BuildHistogram()
                .Name("podnet_test_latency_seconds")
                .Help("test")
                .Register(m.registry())
                .Add({{"peer", "x"}}, LatencyBuckets());
  h.Observe(0.000123);
  std::string text = m.Serialize();

  auto les = LeValues(text, "podnet_test_latency_seconds");
  ASSERT_EQ(les.size(), LatencyBuckets().size() + 1) << text;
  EXPECT_EQ(les.back(), "+Inf");
  for (std::size_t i = 0; i < LatencyBuckets().size(); ++i) {
    const std::string& le = les[i];
    // Parses back to the very bound, and is short: at most 3 significant digits need at most
    // "1.25e-05" (8 characters) or "0.125" (5).
    EXPECT_EQ(std::strtod(le.c_str(), nullptr), LatencyBuckets()[i]) << le;
    EXPECT_LE(le.size(), 8u) << le;
    EXPECT_EQ(le.find("0000000"), std::string::npos) << le;
    EXPECT_EQ(le.find("9999999"), std::string::npos) << le;
  }
  // Only this histogram's lines: other series' values (process_cpu_seconds_total
  // 9.619999999999999 after a slow sanitized run) are not bucket bounds.
  std::string lines;
  for (std::size_t at = text.find("podnet_test_latency_seconds_bucket"); at != std::string::npos;
       at = text.find("podnet_test_latency_seconds_bucket", at + 1)) {
    lines += text.substr(at, text.find('\n', at) - at) + "\n";
  }
  EXPECT_NE(lines.find("le=\"2.2e-05\""), std::string::npos) << text;
  EXPECT_EQ(lines.find("0000000001"), std::string::npos) << lines;
  EXPECT_EQ(lines.find("9999999999"), std::string::npos) << lines;
}

TEST(LatencyBucketsTest, LeIsShortestTextInPrintfGStyle) {
  // The shortest digits that read back to the bound, written as %g writes them: scientific
  // when the decimal exponent is below -4 or at least 16 (the serializer's precision).
  const std::vector<std::pair<double, std::string>> want = {{2.5e-07, "2.5e-07"},
                                                            {1e-05, "1e-05"},
                                                            {8e-05, "8e-05"},
                                                            {0.0001, "0.0001"},
                                                            {6e-04, "0.0006"},
                                                            {0.3, "0.3"},
                                                            {1.0 / 3, "0.3333333333333333"},
                                                            {1, "1"},
                                                            {100, "100"},
                                                            {123456.789, "123456.789"},
                                                            {1e6, "1000000"},
                                                            {5e15, "5000000000000000"},
                                                            {1e16, "1e+16"},
                                                            {1e21, "1e+21"}};
  std::vector<double> bounds;
  for (const auto& [v, text] : want) bounds.push_back(v);
  Metrics m;
  prometheus::BuildHistogram()
      .Name("podnet_test_style_seconds")
      .Help("test")
      .Register(m.registry())
      .Add({}, bounds);
  std::string text = m.Serialize();
  auto les = LeValues(text, "podnet_test_style_seconds");
  ASSERT_EQ(les.size(), want.size() + 1) << text;
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(les[i], want[i].second);
  EXPECT_EQ(les.back(), "+Inf");
}

TEST(LatencyBucketsTest, ShortLeDoesNotTouchOtherLabelsOrValues) {
  Metrics m;
  // A label whose name ends in "le" and a numeric label value elsewhere are not bucket bounds.
  prometheus::BuildGauge()
      .Name("podnet_test_gauge")
      .Help("test")
      .Register(m.registry())
      .Add({{"scale", "8.000000000000001e-05"}, {"x", "0.0005999999999999999"}})
      .Set(0.1);
  auto& h = prometheus::BuildHistogram()
                .Name("podnet_test_seconds")
                .Help("test")
                .Register(m.registry())
                .Add({{"peer", "le=\"1\""}}, std::vector<double>{8e-05, 6e-04});
  h.Observe(7e-05);
  h.Observe(1.0);
  std::string text = m.Serialize();
  EXPECT_NE(text.find("scale=\"8.000000000000001e-05\""), std::string::npos) << text;
  EXPECT_NE(text.find("x=\"0.0005999999999999999\""), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"8e-05\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"0.0006\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"+Inf\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("podnet_test_seconds_count{peer=\"le=\\\"1\\\"\"} 2\n"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace podnet::metrics
