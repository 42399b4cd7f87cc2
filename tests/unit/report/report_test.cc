#include "exporter/report/report.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "exporter/metrics/buckets.h"

namespace podnet::report {
namespace {

// Samples the way a path's RTTs come: a floor plus a lognormal queueing part (seconds).
std::vector<double> Rtts(double floor, double jitter, int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<double> d(std::log(jitter), 0.5);
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(floor + d(rng));
  return out;
}

double ExactQuantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(std::ceil(q * v.size())) - 1];
}

// The bucket of metrics::LatencyBuckets() that holds x: (lower, upper].
std::pair<double, double> BucketOf(double x) {
  double lo = 0;
  for (double b : metrics::LatencyBuckets()) {
    if (x <= b) return {lo, b};
    lo = b;
  }
  return {lo, INFINITY};
}

// A registry holding what the probes record, under their metric and label names.
struct Recorded {
  prometheus::Registry registry;
  prometheus::Family<prometheus::Histogram>& rtt =
      prometheus::BuildHistogram().Name("podnet_rtt_seconds").Help("RTT").Register(registry);
  prometheus::Family<prometheus::Counter>& sent = prometheus::BuildCounter()
                                                      .Name("podnet_rtt_packets_sent_total")
                                                      .Help("sent")
                                                      .Register(registry);
  prometheus::Family<prometheus::Counter>& received = prometheus::BuildCounter()
                                                          .Name("podnet_rtt_packets_received_total")
                                                          .Help("received")
                                                          .Register(registry);
  prometheus::Family<prometheus::Counter>& bytes = prometheus::BuildCounter()
                                                       .Name("podnet_probe_sent_bytes_total")
                                                       .Help("bytes")
                                                       .Register(registry);

  // One peer's train results: every sample answered, `lost` more sent and never answered.
  void Peer(const std::string& peer, const std::string& path, const std::vector<double>& rtts,
            int lost = 0) {
    prometheus::Labels l{{"peer", peer}, {"path", path}, {"protocol", "icmp"}};
    auto& h = rtt.Add(l, metrics::LatencyBuckets());
    for (double x : rtts) h.Observe(x);
    sent.Add(l).Increment(static_cast<double>(rtts.size() + lost));
    received.Add(l).Increment(static_cast<double>(rtts.size()));
  }
};

RunInfo Probed(std::vector<std::string> configured = {"rtt"}) {
  RunInfo run;
  run.self_name = "client";
  run.started = "2026-12-01T05:00:00Z";
  run.duration_seconds = 60;
  run.configured = std::move(configured);
  run.interval_seconds = {{"rtt", 10}};
  return run;
}

const Row* FindRow(const Report& r, const std::string& section, const std::string& path) {
  for (const auto& s : r.sections) {
    if (s.id != section) continue;
    for (const auto& row : s.rows) {
      for (const auto& [k, v] : row.key) {
        if (k == "path" && v == path) return &row;
      }
    }
  }
  return nullptr;
}

TEST(BucketQuantileTest, WithinTheBucketOfTheExactQuantileOfRealSamples) {
  prometheus::Registry registry;
  auto& h = prometheus::BuildHistogram().Name("x").Help("x").Register(registry).Add(
      {}, metrics::LatencyBuckets());
  auto samples = Rtts(300e-6, 40e-6, 5000, 1);
  for (double x : samples) h.Observe(x);
  Buckets b;
  for (const auto& bucket : h.Collect().histogram.bucket) {
    b.cumulative.emplace_back(bucket.upper_bound, static_cast<double>(bucket.cumulative_count));
  }
  for (double q : {0.5, 0.9, 0.99}) {
    double exact = ExactQuantile(samples, q);
    auto [lo, hi] = BucketOf(exact);
    double interpolated = BucketQuantile(q, b);
    EXPECT_GE(interpolated, lo) << "q=" << q;
    EXPECT_LE(interpolated, hi) << "q=" << q;
  }
  double max = *std::max_element(samples.begin(), samples.end());
  EXPECT_EQ(BucketMaxBound(b), BucketOf(max).second);
}

TEST(BucketQuantileTest, PromqlEdgeCases) {
  // histogram_quantile: no observations → NaN; a quantile in +Inf → the highest finite bound;
  // the lowest bucket starts at 0.
  Buckets empty{{{0.001, 0}, {INFINITY, 0}}};
  EXPECT_TRUE(std::isnan(BucketQuantile(0.5, empty)));
  EXPECT_TRUE(std::isnan(BucketMaxBound(empty)));
  Buckets high{{{0.001, 1}, {0.002, 1}, {INFINITY, 4}}};
  EXPECT_EQ(BucketQuantile(0.9, high), 0.002);
  EXPECT_TRUE(std::isinf(BucketMaxBound(high)));
  Buckets low{{{0.001, 4}, {INFINITY, 4}}};
  EXPECT_DOUBLE_EQ(BucketQuantile(0.5, low), 0.0005);
}

TEST(ReportTest, LadderLossAndFailures) {
  Recorded rec;
  rec.Peer("same", "same_node", Rtts(60e-6, 10e-6, 400, 2));
  rec.Peer("zone", "same_zone", Rtts(400e-6, 20e-6, 400, 3), 4);
  rec.Peer("cross", "cross_zone", Rtts(600e-6, 20e-6, 400, 4));
  rec.Peer("dead", "cross_zone", {}, 40);
  Report r = Build(rec.registry.Collect(), Probed());
  const Row* same = FindRow(r, "rtt", "same_node");
  const Row* zone = FindRow(r, "rtt", "same_zone");
  const Row* cross = FindRow(r, "rtt", "cross_zone");
  ASSERT_TRUE(same && zone && cross);
  EXPECT_LT(same->figures.at("p50_seconds").value, zone->figures.at("p50_seconds").value);
  EXPECT_LT(zone->figures.at("p50_seconds").value, cross->figures.at("p50_seconds").value);
  EXPECT_DOUBLE_EQ(zone->figures.at("loss_ratio").value, 4.0 / 404);
  EXPECT_DOUBLE_EQ(cross->figures.at("loss_ratio").value, 40.0 / 440);
  EXPECT_EQ(cross->figures.at("peers").value, 2);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0].probe, "rtt");
  EXPECT_EQ(r.failures[0].target, "dead");
  // Kinds that are off are present and say so.
  std::string md = ToMarkdown(r);
  EXPECT_NE(md.find("## HTTP /echo: keep-alive vs new connection\n\nNot configured"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- rtt → dead: 100% loss (40 packets sent)"), std::string::npos) << md;
  EXPECT_NE(md.find("histogram_quantile"), std::string::npos);
}

// A peer none of whose bursts completed has no throughput series, only errors: it failed. One
// that completed a burst beside an error did not; nor did one skipped for the byte budget.
TEST(ReportTest, PeerWithNoCompletedBurstFailedBudgetSkipsDidNot) {
  prometheus::Registry registry;
  auto& tput = prometheus::BuildGauge()
                   .Name("podnet_burst_throughput_bytes_per_second")
                   .Help("throughput")
                   .Register(registry);
  auto& errors = prometheus::BuildCounter()
                     .Name("podnet_probe_errors_total")
                     .Help("errors")
                     .Register(registry);
  tput.Add({{"peer", "live"}, {"path", "same_zone"}, {"streams", "1"}}).Set(1.2e9);
  errors.Add({{"probe", "burst"}, {"peer", "live"}, {"path", "same_zone"}, {"reason", "timeout"}})
      .Increment();
  errors.Add({{"probe", "burst"}, {"peer", "dead"}, {"path", "cross_zone"}, {"reason", "refused"}})
      .Increment(2);
  errors
      .Add({{"probe", "burst"},
            {"peer", "skipped"},
            {"path", "same_zone"},
            {"reason", "budget_exhausted"}})
      .Increment(2);
  // Another kind's errors are not the burst's: a peer with only RTT errors failed no burst.
  errors.Add({{"probe", "rtt"}, {"peer", "other"}, {"path", "same_node"}, {"reason", "timeout"}})
      .Increment();
  Report r = Build(registry.Collect(), Probed({"burst"}));
  ASSERT_EQ(r.failures.size(), 1u) << ToMarkdown(r);
  EXPECT_EQ(r.failures[0].probe, "burst");
  EXPECT_EQ(r.failures[0].target, "dead");
  EXPECT_EQ(r.failures[0].reason, "no burst completed (refused ×2)");
  std::string md = ToMarkdown(r);
  EXPECT_NE(md.find("errors of skipped: budget_exhausted ×2"), std::string::npos) << md;
}

TEST(ReportTest, JsonRoundTripsAndComparesWithItselfUnmarked) {
  Recorded rec;
  rec.Peer("same", "same_node", Rtts(60e-6, 10e-6, 300, 5));
  rec.Peer("cross", "cross_zone", Rtts(600e-6, 20e-6, 300, 6));
  Report r = Build(rec.registry.Collect(), Probed());
  auto j = ToJson(r);
  std::string error;
  auto back = FromJson(nlohmann::json::parse(j.dump()), &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(ToJson(*back), j);
  EXPECT_EQ(ToMarkdown(*back), ToMarkdown(r));
  Compare(*back, r);
  EXPECT_TRUE(back->compared);
  EXPECT_EQ(BeyondSpread(*back), 0);
  EXPECT_TRUE(FindRow(*back, "rtt", "cross_zone")->figures.at("p50_seconds").baseline);
}

TEST(ReportTest, DoubledFigureInTheBaselineIsMarkedAndOnlyIt) {
  Recorded rec;
  rec.Peer("same", "same_node", Rtts(60e-6, 10e-6, 300, 7));
  rec.Peer("cross", "cross_zone", Rtts(600e-6, 20e-6, 300, 8));
  Report r = Build(rec.registry.Collect(), Probed());
  auto doctored = ToJson(r);
  for (auto& s : doctored["sections"]) {
    if (s["id"] != "rtt") continue;
    for (auto& row : s["rows"]) {
      if (row["key"]["path"] == "cross_zone") {
        auto& p50 = row["figures"]["p50_seconds"]["value"];
        p50 = p50.get<double>() * 2;
      }
    }
  }
  std::string error;
  auto baseline = FromJson(doctored, &error);
  ASSERT_TRUE(baseline) << error;
  Compare(r, *baseline);
  EXPECT_EQ(BeyondSpread(r), 1);
  EXPECT_TRUE(FindRow(r, "rtt", "cross_zone")->figures.at("p50_seconds").beyond_spread);
  EXPECT_NE(ToMarkdown(r).find("-50% !)"), std::string::npos) << ToMarkdown(r);
}

TEST(ReportTest, SecondRunOfTheSameNetworkStaysWithinSpreadAShiftedOneDoesNot) {
  Recorded a, b, shifted;
  a.Peer("cross", "cross_zone", Rtts(600e-6, 30e-6, 400, 9));
  b.Peer("cross", "cross_zone", Rtts(600e-6, 30e-6, 400, 10));
  shifted.Peer("cross", "cross_zone", Rtts(1200e-6, 30e-6, 400, 11));
  Report ra = Build(a.registry.Collect(), Probed());
  Report rb = Build(b.registry.Collect(), Probed());
  Report rs = Build(shifted.registry.Collect(), Probed());
  Compare(rb, ra);
  Compare(rs, ra);
  const auto& same = FindRow(rb, "rtt", "cross_zone")->figures;
  const auto& moved = FindRow(rs, "rtt", "cross_zone")->figures;
  EXPECT_FALSE(same.at("p50_seconds").beyond_spread);
  EXPECT_FALSE(same.at("p90_seconds").beyond_spread);
  EXPECT_TRUE(moved.at("p50_seconds").beyond_spread);
  EXPECT_TRUE(moved.at("p90_seconds").beyond_spread);
}

TEST(ReportTest, CrossZoneCostPerRoundAtTheConfiguredInterval) {
  Recorded rec;
  prometheus::Labels l{{"peer", "cross"}, {"path", "cross_zone"}, {"probe", "rtt"}};
  rec.bytes.Add(l).Increment(6e6);  // 6 rounds in the run
  RunInfo run = Probed();
  run.targets = {{"rtt", "cross", "cross_zone", 6}};
  run.price_usd_per_gb = 0.02;
  Report r = Build(rec.registry.Collect(), run);
  const Row* cost = FindRow(r, "cost", "cross_zone");
  ASSERT_TRUE(cost);
  EXPECT_DOUBLE_EQ(cost->figures.at("run_bytes").value, 6e6);
  // 1e6 bytes a round, a round every 10 s: 360 rounds an hour.
  EXPECT_DOUBLE_EQ(cost->figures.at("daemon_bytes_per_hour").value, 360e6);
  EXPECT_NEAR(cost->figures.at("daemon_usd_per_30_days").value, 360e6 * 720 / 1e9 * 0.02, 1e-9);
}

TEST(ReportTest, RejectsWhatIsNotAVersionOneReport) {
  std::string error;
  EXPECT_FALSE(FromJson(nlohmann::json::parse(R"({"schema":"x"})"), &error));
  auto j = ToJson(Build({}, Probed()));
  j["version"] = 2;
  EXPECT_FALSE(FromJson(j, &error));
  EXPECT_NE(error.find("version 2"), std::string::npos) << error;
  j["version"] = 1;
  j["sections"] = 3;
  EXPECT_FALSE(FromJson(j, &error));
}

}  // namespace
}  // namespace podnet::report
