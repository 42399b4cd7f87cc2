#include "exporter/report/report.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "exporter/metrics/buckets.h"
#include "exporter/report/report_html.h"

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
    prometheus::Labels l{{"peer", peer}, {"path_class", path}, {"protocol", "icmp"}};
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
        if (k == "path_class" && v == path) return &row;
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
  tput.Add({{"peer", "live"}, {"path_class", "same_zone"}, {"streams", "1"}}).Set(1.2e9);
  errors
      .Add({{"probe", "burst"},
            {"peer", "live"},
            {"path_class", "same_zone"},
            {"reason", "timeout"}})
      .Increment();
  errors
      .Add({{"probe", "burst"},
            {"peer", "dead"},
            {"path_class", "cross_zone"},
            {"reason", "refused"}})
      .Increment(2);
  errors
      .Add({{"probe", "burst"},
            {"peer", "skipped"},
            {"path_class", "same_zone"},
            {"reason", "budget_exhausted"}})
      .Increment(2);
  // Another kind's errors are not the burst's: a peer with only RTT errors failed no burst.
  errors
      .Add(
          {{"probe", "rtt"}, {"peer", "other"}, {"path_class", "same_node"}, {"reason", "timeout"}})
      .Increment();
  Report r = Build(registry.Collect(), Probed({"burst"}));
  ASSERT_EQ(r.failures.size(), 1u) << ToMarkdown(r);
  EXPECT_EQ(r.failures[0].probe, "burst");
  EXPECT_EQ(r.failures[0].target, "dead");
  EXPECT_EQ(r.failures[0].reason, "no burst completed (refused ×2)");
  std::string md = ToMarkdown(r);
  EXPECT_NE(md.find("errors of skipped: budget_exhausted ×2"), std::string::npos) << md;
}

TEST(ReportTest, PathMtuPerPathClassAndDirectionWithBlackHolesNamed) {
  prometheus::Registry registry;
  auto& size =
      prometheus::BuildGauge().Name("podnet_path_mtu_bytes").Help("mtu").Register(registry);
  auto& hole =
      prometheus::BuildGauge().Name("podnet_path_mtu_black_hole").Help("hole").Register(registry);
  auto& iface = prometheus::BuildGauge()
                    .Name("podnet_path_mtu_interface_bytes")
                    .Help("iface")
                    .Register(registry);
  struct P {
    const char* peer;
    const char* path;
    double forward, reverse;
    bool hole;
  };
  for (P p : {P{"a", "cross_zone", 1500, 1500, true}, P{"b", "cross_zone", 9001, 9001, false},
              P{"c", "same_zone", 9001, 9001, false}, P{"d", "same_zone", 0, -1, false}}) {
    for (auto [direction, bytes] : {std::pair{"forward", p.forward}, {"reverse", p.reverse}}) {
      if (bytes < 0) continue;  // no reverse series: the peer answered nothing
      prometheus::Labels l{{"peer", p.peer}, {"path_class", p.path}, {"direction", direction}};
      size.Add(l).Set(bytes);
      hole.Add(l).Set(p.hole ? 1 : 0);
    }
    iface.Add({{"peer", p.peer}, {"path_class", p.path}}).Set(9001);
  }
  Report r = Build(registry.Collect(), Probed({"mtu"}));
  const Section& s = r.sections.back();
  ASSERT_EQ(s.id, "mtu");
  ASSERT_TRUE(s.configured);
  ASSERT_EQ(s.rows.size(), 4u) << ToMarkdown(r);  // 2 path classes x 2 directions
  const Row& cross_forward = s.rows[0];
  EXPECT_EQ(cross_forward.key, (std::vector<std::pair<std::string, std::string>>{
                                   {"path_class", "cross_zone"}, {"direction", "forward"}}));
  EXPECT_EQ(cross_forward.figures.at("path_mtu_min_bytes").value, 1500);
  EXPECT_EQ(cross_forward.figures.at("path_mtu_max_bytes").value, 9001);
  EXPECT_EQ(cross_forward.figures.at("black_hole_peers").value, 1);
  EXPECT_EQ(cross_forward.figures.at("interface_mtu_bytes").value, 9001);
  std::string md = ToMarkdown(r);
  EXPECT_NE(md.find("black hole towards a (forward, reverse)"), std::string::npos) << md;
  ASSERT_EQ(r.failures.size(), 1u) << md;
  EXPECT_EQ(r.failures[0].target, "d");
  // The JSON round trip keeps the section and its keys.
  std::string error;
  auto back = FromJson(ToJson(r), &error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_EQ(back->sections.back().rows.size(), 4u);
  EXPECT_EQ(back->sections.back().rows[0].key, cross_forward.key);
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
      if (row["key"]["path_class"] == "cross_zone") {
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

// Many rows (a linear search per row took 52 s at 80,000): every row finds its own baseline row
// by section and key, not a neighbour's, and a row the baseline lacks stays unmarked.
TEST(ReportTest, ComparesManyRowsEachAgainstItsOwnKey) {
  constexpr int kRows = 50000;
  Report a, b;
  Section rtt, http;
  rtt.id = "rtt";
  http.id = "http";
  a.sections.push_back(rtt);
  b.sections.push_back(rtt);
  // The same keys in the other section: a match must be by section too.
  b.sections.push_back(http);
  for (int i = 0; i < kRows; ++i) {
    Row row;
    row.key = {{"path_class", std::to_string(i)}, {"protocol", "icmp"}};
    row.figures["p50_seconds"].value = i;
    a.sections[0].rows.push_back(row);
    if (i % 7 == 3) continue;  // absent from the baseline
    row.figures["p50_seconds"].value = 2.0 * i + 1;
    b.sections[1].rows.push_back(row);
    row.figures["p50_seconds"].value = i + 0.5;
    b.sections[0].rows.push_back(row);
  }
  // The baseline's rows in another order than the report's.
  std::reverse(b.sections[0].rows.begin(), b.sections[0].rows.end());
  Compare(a, b);
  int missing = 0;
  for (const auto& row : a.sections[0].rows) {
    int i = std::stoi(row.key[0].second);
    const Figure& f = row.figures.at("p50_seconds");
    if (i % 7 == 3) {
      missing += !f.baseline;
      continue;
    }
    ASSERT_TRUE(f.baseline) << i;
    ASSERT_EQ(*f.baseline, i + 0.5) << i;
  }
  EXPECT_EQ(missing, (kRows + 3) / 7);
}

// The same key twice in one section would print two rows for one thing and make a comparison
// ambiguous: refused with the JSON path of the second and the first.
TEST(ReportTest, RepeatedRowKeyIsRefusedWithItsPath) {
  Recorded rec;
  rec.Peer("same", "same_node", Rtts(60e-6, 10e-6, 100, 21));
  rec.Peer("cross", "cross_zone", Rtts(600e-6, 20e-6, 100, 22));
  auto j = ToJson(Build(rec.registry.Collect(), Probed()));
  std::string error;
  ASSERT_TRUE(FromJson(j, &error)) << error;
  ASSERT_EQ(j["sections"][0]["id"], "rtt");
  ASSERT_GE(j["sections"][0]["rows"].size(), 2u);
  auto doctored = j;
  doctored["sections"][0]["rows"].push_back(j["sections"][0]["rows"][0]);
  std::size_t last = doctored["sections"][0]["rows"].size() - 1;
  EXPECT_FALSE(FromJson(doctored, &error));
  EXPECT_EQ(error, "sections[0].rows[" + std::to_string(last) +
                       "].key: repeats the key of sections[0].rows[0]");
  // The same figures under another key are two rows.
  doctored["sections"][0]["rows"][last]["key"]["path_class"] = "same_zone";
  EXPECT_TRUE(FromJson(doctored, &error)) << error;
  // A section twice: printed twice, compared once (the last copy) before it was refused.
  auto twice = j;
  twice["sections"].push_back(j["sections"][0]);
  std::size_t copy = twice["sections"].size() - 1;
  EXPECT_FALSE(FromJson(twice, &error));
  EXPECT_EQ(error, "sections[" + std::to_string(copy) + "].id: repeats the id of sections[0]");
}

// A value nested 100,000 arrays deep (a 200 KB file) where the error quotes it: refused with its
// path, not a crash (the quote recursed once per level and overflowed the stack at ~50,000).
TEST(ReportTest, ADeeplyNestedValueIsRefusedNotACrash) {
  Recorded rec;
  rec.Peer("same", "same_node", Rtts(60e-6, 10e-6, 100, 21));
  const auto good = ToJson(Build(rec.registry.Collect(), Probed()));
  constexpr std::size_t kDepth = 100000;
  for (const char* where : {"/version", "/sections/0/rows/0/figures/p50_seconds/value",
                            "/sections/0/rows/0/key/path_class"}) {
    // Parsed (nlohmann's parser and destructor do not recurse); moved in, never copied.
    auto deep = nlohmann::json::parse(std::string(kDepth, '[') + std::string(kDepth, ']'));
    nlohmann::json doctored = good;
    doctored[nlohmann::json::json_pointer(where)] = std::move(deep);
    std::string error;
    EXPECT_FALSE(FromJson(doctored, &error)) << where;
    EXPECT_NE(error.find("[...]"), std::string::npos) << where << ": " << error;
  }
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

// The verdict follows the data: a second run of the same network (other samples, same
// distribution) changes nothing beyond the spread; a run whose cross-zone floor moved is named
// first, with its own numbers.
TEST(ReportVerdictTest, NamesWhatMovedBeyondTheSpreadAndNothingElse) {
  Recorded a, b, shifted;
  for (Recorded* r : {&a, &b, &shifted}) {
    unsigned seed = r == &a ? 20 : r == &b ? 21 : 22;
    r->Peer("same", "same_node", Rtts(60e-6, 10e-6, 400, seed));
    r->Peer("zone", "same_zone", Rtts(400e-6, 20e-6, 400, seed + 10));
    r->Peer("cross", "cross_zone", Rtts(r == &shifted ? 1200e-6 : 600e-6, 30e-6, 400, seed + 20));
  }
  Report ra = Build(a.registry.Collect(), Probed());
  Report rb = Build(b.registry.Collect(), Probed());
  Report rs = Build(shifted.registry.Collect(), Probed());
  EXPECT_EQ(VerdictOf(rb).line, "") << "not compared yet";
  Compare(rb, ra);
  Compare(rs, ra);
  // What the RTT table shows and can mark: peers, sent, loss, p50, p90, p99 per path class
  // (400 samples carry every percentile; max, one sample's bucket, is never marked).
  int shown = 0;
  for (const auto& row : rb.sections[0].rows) {
    for (const auto& [name, f] : row.figures) {
      shown += name != "samples" && f.baseline && std::isfinite(f.spread);
    }
  }
  EXPECT_EQ(shown, 3 * 6);
  Verdict same = VerdictOf(rb);
  EXPECT_EQ(same.figures, shown);
  EXPECT_TRUE(same.changed.empty()) << same.line;
  EXPECT_EQ(same.line,
            "No change beyond the run-to-run spread in " + std::to_string(shown) + " figures.");

  Verdict moved = VerdictOf(rs);
  EXPECT_EQ(moved.figures, shown);
  ASSERT_FALSE(moved.changed.empty()) << ToMarkdown(rs);
  for (const auto& c : moved.changed) {
    EXPECT_EQ(c.section, "rtt");
    EXPECT_EQ(c.key[0].second, "cross_zone") << c.figure;
    EXPECT_GT(std::abs(c.value - c.baseline), c.spread);
  }
  const Figure& p50 = FindRow(rs, "rtt", "cross_zone")->figures.at("p50_seconds");
  char expected[160];
  std::snprintf(expected, sizeof expected, "RTT cross_zone icmp p50 ms %.3f → %.3f (+%.0f %%)",
                *p50.baseline * 1e3, p50.value * 1e3, 100 * (p50.value / *p50.baseline - 1));
  EXPECT_EQ(moved.line.rfind(std::to_string(moved.changed.size()) + " of " + std::to_string(shown) +
                                 " figures changed beyond their run-to-run spread: ",
                             0),
            0u)
      << moved.line;
  EXPECT_NE(moved.line.find(expected), std::string::npos) << moved.line;
  // First in the Markdown, and in the JSON.
  std::string md = ToMarkdown(rs);
  EXPECT_EQ(md.find("# podnet-exporter report\n\n**Verdict:** " + moved.line), 0u) << md;
  auto j = ToJson(rs);
  EXPECT_EQ(j["verdict"]["summary"], moved.line);
  EXPECT_EQ(j["verdict"]["changed"].size(), moved.changed.size());
  // Read back, the verdict is recomputed from the figures: the same.
  std::string error;
  auto back = FromJson(j, &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(VerdictOf(*back).line, moved.line);
}

// A cell whose figure did not move at its precision is the value alone; one that moved shows
// the change, ! beyond the spread.
TEST(ReportVerdictTest, CellsWithoutChangeArePlain) {
  Recorded rec;
  rec.Peer("cross", "cross_zone", Rtts(600e-6, 20e-6, 300, 23));
  Report r = Build(rec.registry.Collect(), Probed());
  Report self = r;
  Compare(self, r);
  std::string md = ToMarkdown(self);
  auto table = md.substr(md.find("| cross_zone | icmp |"));
  table = table.substr(0, table.find('\n'));
  EXPECT_EQ(table.find('('), std::string::npos) << table;
  auto doctored = ToJson(r);
  auto& p50 = doctored["sections"][0]["rows"][0]["figures"]["p50_seconds"]["value"];
  p50 = p50.get<double>() * 2;
  std::string error;
  auto baseline = FromJson(doctored, &error);
  ASSERT_TRUE(baseline) << error;
  Compare(r, *baseline);
  md = ToMarkdown(r);
  table = md.substr(md.find("| cross_zone | icmp |"));
  table = table.substr(0, table.find('\n'));
  EXPECT_EQ(std::count(table.begin(), table.end(), '('), 1) << table;
  EXPECT_NE(table.find("-50% !)"), std::string::npos) << table;
}

// Percentiles only where the samples carry them: MinSamplesFor(q) is the smallest n whose
// smallest and largest samples enclose the q-quantile 95 % of the time, which a simulation of
// uniform samples confirms on both sides of it; Build() leaves out what falls below.
TEST(ReportVerdictTest, PercentilesNeedTheSamplesThatCarryThem) {
  std::mt19937 rng(24);
  std::uniform_real_distribution<double> u(0, 1);
  auto coverage = [&](double q, int n, int trials) {
    int hit = 0;
    for (int t = 0; t < trials; ++t) {
      double lo = 1, hi = 0;
      for (int i = 0; i < n; ++i) {
        double x = u(rng);
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
      hit += lo <= q && q <= hi;
    }
    return static_cast<double>(hit) / trials;
  };
  for (double q : {0.5, 0.9}) {
    int n = MinSamplesFor(q);
    EXPECT_GE(coverage(q, n, 200000), 0.948) << "q=" << q << " n=" << n;
    EXPECT_LT(coverage(q, n - 1, 200000), 0.95) << "q=" << q << " n=" << n - 1;
  }
  EXPECT_GT(MinSamplesFor(0.99), MinSamplesFor(0.9));
  for (double q : {0.5, 0.9, 0.99}) {
    int n = MinSamplesFor(q);
    for (int have : {n - 1, n}) {
      Recorded rec;
      rec.Peer("cross", "cross_zone", Rtts(600e-6, 20e-6, have, 25));
      Report r = Build(rec.registry.Collect(), Probed());
      const auto& figs = FindRow(r, "rtt", "cross_zone")->figures;
      std::string name = q == 0.5 ? "p50_seconds" : q == 0.9 ? "p90_seconds" : "p99_seconds";
      EXPECT_EQ(std::isnan(figs.at(name).value), have < n) << name << " from " << have;
      EXPECT_FALSE(std::isnan(figs.at("max_seconds").value));
      std::string md = ToMarkdown(r);
      EXPECT_EQ(md.find("| n<" + std::to_string(n) + " |") != std::string::npos, have < n)
          << name << " from " << have << ":\n"
          << md;
      if (have < n) {
        EXPECT_TRUE(ToJson(r)["sections"][0]["rows"][0]["figures"][name]["value"].is_null());
      }
    }
  }
}

// The HTML page: self-contained, every string escaped, and each number a picture draws
// carries the JSON figure it shows (tests/integration/report_html_test.py checks the same in a
// real browser).
TEST(ReportHtmlTest, PicturesCarryTheJsonFiguresAndNamesAreEscaped) {
  Recorded rec;
  rec.Peer("same", "same_node", Rtts(60e-6, 10e-6, 300, 26));
  rec.Peer("cross", "cross_zone", Rtts(600e-6, 20e-6, 3, 27));  // too few for a p50
  RunInfo run = Probed();
  run.self_name = "<script>alert(1)</script>";
  Report r = Build(rec.registry.Collect(), run);
  r.failures.push_back({"rtt", "peer\"'&<b>", "gone"});
  std::string page = ToHtml(r);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("<b>"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(page.find("peer&quot;&#39;&amp;&lt;b&gt;"), std::string::npos);
  EXPECT_EQ(page.find("://"), std::string::npos) << "no URL: nothing to fetch";
  auto j = ToJson(r);
  for (const auto& row : j["sections"][0]["rows"]) {
    std::string key = HtmlEscape(row["key"].dump());
    for (const char* name : {"p50_seconds", "p90_seconds"}) {
      const auto& v = row["figures"][name]["value"];
      std::string drawn = "data-section=\"rtt\" data-key=\"" + key + "\" data-figure=\"" + name +
                          "\" data-value=\"" + v.dump() + "\">";
      auto at = page.find(drawn);
      ASSERT_NE(at, std::string::npos) << drawn << "\n" << page;
      std::string text = page.substr(at + drawn.size(), page.find('<', at) - at - drawn.size());
      if (v.is_null()) {
        EXPECT_EQ(text.rfind("n&lt;", 0), 0u) << text;  // "n<6", escaped
      } else {
        char ms[32];
        std::snprintf(ms, sizeof ms, "%.3f", v.get<double>() * 1e3);
        EXPECT_EQ(text, ms);
      }
    }
  }
  EXPECT_NE(page.find("id=\"zone-matrix\""), std::string::npos);
}

TEST(ReportTest, CrossZoneCostPerRoundAtTheConfiguredInterval) {
  Recorded rec;
  prometheus::Labels l{{"peer", "cross"}, {"path_class", "cross_zone"}, {"probe", "rtt"}};
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

TEST(ReportTest, RejectsWhatIsNotAVersionTwoReport) {
  std::string error;
  EXPECT_FALSE(FromJson(nlohmann::json::parse(R"({"schema":"x"})"), &error));
  auto j = ToJson(Build({}, Probed()));
  // Version 1 keyed rows and targets by `path`, now `path_class`: an old baseline is refused
  // for its version, with that in the message.
  j["version"] = 1;
  EXPECT_FALSE(FromJson(j, &error));
  EXPECT_EQ(error, "report version 1, this build reads version 2");
  j["version"] = 2;
  j["sections"] = 3;
  EXPECT_FALSE(FromJson(j, &error));
}

// A report file is read as hostile input: every value is checked against what its field means,
// and refused with its JSON path instead of being printed as a figure (issue 21: a string p50
// printed as +Inf ms, -5 peers, -500 % loss, version 1.5 read as 1).
TEST(ReportTest, ValuesOutsideTheirMeaningAreRefusedWithTheirJsonPath) {
  Recorded rec;
  rec.Peer("same", "same_node", Rtts(60e-6, 10e-6, 300, 12));
  RunInfo run = Probed();
  run.targets = {{"rtt", "same", "same_node", 6}};
  const nlohmann::json good = ToJson(Build(rec.registry.Collect(), run));
  std::string error;
  ASSERT_TRUE(FromJson(good, &error)) << error;
  ASSERT_EQ(good["sections"][0]["id"], "rtt");
  using Ptr = nlohmann::json::json_pointer;
  const std::string fig = "/sections/0/rows/0/figures/";
  struct Case {
    std::string pointer;   // where the doctored value goes
    nlohmann::json value;  // what it is
    std::string path;      // what the error must start with
  };
  for (const Case& c : std::vector<Case>{
           {fig + "p50_seconds/value", "fast", "sections[0].rows[0].figures.p50_seconds.value: "},
           {fig + "p50_seconds/value", -0.001, "sections[0].rows[0].figures.p50_seconds.value: "},
           {fig + "peers/value", -5, "sections[0].rows[0].figures.peers.value: "},
           {fig + "peers/value", nullptr, "sections[0].rows[0].figures.peers.value: "},
           {fig + "peers/value", "+Inf", "sections[0].rows[0].figures.peers.value: "},
           {fig + "loss_ratio/value", -5, "sections[0].rows[0].figures.loss_ratio.value: "},
           {fig + "loss_ratio/value", 1.5, "sections[0].rows[0].figures.loss_ratio.value: "},
           {fig + "samples/value", "-Inf", "sections[0].rows[0].figures.samples.value: "},
           {fig + "p90_seconds/spread", -1, "sections[0].rows[0].figures.p90_seconds.spread: "},
           {fig + "packets_sent/value", true, "sections[0].rows[0].figures.packets_sent.value: "},
           {"/run/targets/0/rounds", -1, "run.targets[0].rounds: "},
           {"/run/targets/0/rounds", 2.5, "run.targets[0].rounds: "},
           {"/run/duration_seconds", -60, "run.duration_seconds: "},
           {"/run/price_usd_per_gb", "cheap", "run.price_usd_per_gb: "},
           {"/run/interval_seconds/rtt", -10, "run.interval_seconds.rtt: "},
           {"/run/self/name", 7, "run.self.name: "},
           {"/sections/0/configured", "yes", "sections[0].configured: "},
           {"/failures", nlohmann::json::array({{{"probe", "rtt"}}}), "failures[0].target: "},
           // Past what a run can measure (issue 42: 1.2e29 was read as a p50).
           {fig + "path_mtu_min_bytes",
            {{"value", 1e308}, {"spread", 0}},
            "sections[0].rows[0].figures.path_mtu_min_bytes.value: "},
           {fig + "p50_seconds/value", 1.2e29, "sections[0].rows[0].figures.p50_seconds.value: "},
           {fig + "max_seconds/value", 3601, "sections[0].rows[0].figures.max_seconds.value: "},
           {fig + "packets_sent/value", 9007199254740994.0,
            "sections[0].rows[0].figures.packets_sent.value: "},
           {fig + "p50_seconds/spread", 1e6, "sections[0].rows[0].figures.p50_seconds.spread: "},
           {fig + "peers/spread", 1e300, "sections[0].rows[0].figures.peers.spread: "},
       }) {
    nlohmann::json doctored = good;
    doctored[Ptr(c.pointer)] = c.value;
    auto r = FromJson(doctored, &error);
    EXPECT_FALSE(r) << c.pointer << " = " << c.value.dump() << " was read as a figure:\n"
                    << (r ? ToMarkdown(*r) : "");
    if (!r) {
      EXPECT_EQ(error.rfind(c.path, 0), 0u) << error;
    }
  }
  // A key of the document in an error is shown like its strings: no escape sequence.
  nlohmann::json hostile_key = good;
  hostile_key[Ptr("/sections/0/rows/0/figures")]["\x1b[2J"] = {{"value", "x"}, {"spread", 0}};
  EXPECT_FALSE(FromJson(hostile_key, &error));
  EXPECT_EQ(error,
            "sections[0].rows[0].figures.\\x1b[2J.value: \"x\" is not a number (a number, "
            "\"+Inf\" or null)");
  // Versions: only the integer 2.
  for (nlohmann::json v : {nlohmann::json(2.5), nlohmann::json("2"), nlohmann::json(1),
                           nlohmann::json(3), nlohmann::json(-1), nlohmann::json(nullptr)}) {
    nlohmann::json doctored = good;
    doctored["version"] = v;
    EXPECT_FALSE(FromJson(doctored, &error)) << v.dump();
    EXPECT_NE(error.find("version " + v.dump()), std::string::npos) << error;
  }
  // What real reports hold stays readable: no measurement (null), a sample above every bucket.
  nlohmann::json empty = good;
  empty[Ptr(fig + "p50_seconds/value")] = nullptr;
  empty[Ptr(fig + "max_seconds/value")] = "+Inf";
  empty[Ptr(fig + "loss_ratio/value")] = 1;
  EXPECT_TRUE(FromJson(empty, &error)) << error;
  // ... and the bounds themselves: an hour, 2^53.
  nlohmann::json edge = good;
  edge[Ptr(fig + "max_seconds/value")] = 3600;
  edge[Ptr(fig + "packets_sent/value")] = 9007199254740992.0;
  edge[Ptr(fig + "p50_seconds/spread")] = "+Inf";
  EXPECT_TRUE(FromJson(edge, &error)) << error;
}

// The gate fails closed (issue 42): a comparison is complete only when every figure the tables
// show on either side was compared. Each way the data to compare can go (the cases the issue
// found passing as "no change") is named in the verdict and makes it incomplete; the same
// report against itself, or a second run of the same network, stays complete.
TEST(ReportVerdictTest, AComparisonWithSomethingMissingIsIncompleteAndSaysWhat) {
  Recorded a, b;
  for (Recorded* r : {&a, &b}) {
    unsigned seed = r == &a ? 30 : 31;
    r->Peer("zone", "same_zone", Rtts(400e-6, 20e-6, 400, seed));
    r->Peer("cross", "cross_zone", Rtts(600e-6, 30e-6, 400, seed + 10));
  }
  const Report base = Build(a.registry.Collect(), Probed());
  const nlohmann::json run = ToJson(Build(b.registry.Collect(), Probed()));
  std::string error;
  auto judge = [&](const nlohmann::json& input, const Report& baseline) {
    auto r = FromJson(input, &error);
    EXPECT_TRUE(r) << error;
    if (!r) return Verdict{};
    Compare(*r, baseline);
    return VerdictOf(*r);
  };
  Verdict same = judge(run, base);
  EXPECT_TRUE(same.complete) << same.line;
  EXPECT_TRUE(same.uncompared.empty()) << same.line;
  EXPECT_EQ(same.line.rfind("No change beyond the run-to-run spread in ", 0), 0u) << same.line;

  using Ptr = nlohmann::json::json_pointer;
  ASSERT_EQ(run["sections"][0]["id"], "rtt");
  ASSERT_EQ(run["sections"][0]["rows"][0]["key"]["path_class"], "cross_zone");
  struct Case {
    std::string what;
    std::function<void(nlohmann::json&)> doctor;
    std::vector<std::string> named;  // what the verdict must list, in its order
  };
  for (const Case& c : std::vector<Case>{
           {"no sections at all",
            [](nlohmann::json& j) { j["sections"] = nlohmann::json::array(); },
            {"section cost: not in the input", "section rtt: not in the input"}},
           {"the RTT section gone",
            [](nlohmann::json& j) { j["sections"].erase(0); },
            {"section rtt: not in the input"}},
           {"a row's key another protocol",
            [](nlohmann::json& j) { j[Ptr("/sections/0/rows/0/key/protocol")] = "udp"; },
            {"RTT cross_zone udp: not in the baseline", "RTT cross_zone icmp: not in the input"}},
           {"a row's key another spelling",
            [](nlohmann::json& j) { j[Ptr("/sections/0/rows/1/key/path_class")] = "Same_Zone"; },
            {"RTT Same_Zone icmp: not in the baseline", "RTT same_zone icmp: not in the input"}},
           {"a spread +Inf",
            [](nlohmann::json& j) {
              j[Ptr("/sections/0/rows/1/figures/p50_seconds/spread")] = "+Inf";
            },
            {"RTT same_zone icmp p50_seconds: spread not finite in the input"}},
           {"a figure null",
            [](nlohmann::json& j) {
              j[Ptr("/sections/0/rows/1/figures/p90_seconds/value")] = nullptr;
              j[Ptr("/sections/0/rows/1/figures/p90_seconds/spread")] = nullptr;
            },
            {"RTT same_zone icmp p90_seconds: no value in the input"}},
           {"a figure gone",
            [](nlohmann::json& j) { j[Ptr("/sections/0/rows/0/figures")].erase("loss_ratio"); },
            {"RTT cross_zone icmp loss_ratio: not in the input"}},
       }) {
    nlohmann::json doctored = run;
    c.doctor(doctored);
    Verdict v = judge(doctored, base);
    EXPECT_FALSE(v.complete) << c.what << ": " << v.line;
    EXPECT_EQ(v.uncompared, c.named) << c.what << ": " << v.line;
    EXPECT_EQ(v.line.rfind("Incomplete comparison: " + std::to_string(c.named.size()) +
                               " could not be compared (" + c.named[0],
                           0),
              0u)
        << c.what << ": " << v.line;
    // The other way round too: what the input has and the baseline lacks.
    auto other = FromJson(run, &error);
    auto doctored_base = FromJson(doctored, &error);
    ASSERT_TRUE(other && doctored_base) << error;
    Compare(*other, *doctored_base);
    Verdict reverse = VerdictOf(*other);
    EXPECT_FALSE(reverse.complete) << c.what << " in the baseline: " << reverse.line;
    std::vector<std::string> swapped;
    for (std::string n : c.named) {
      auto at = n.rfind("in the ");
      n = n.substr(0, at) + (n.substr(at) == "in the input" ? "in the baseline" : "in the input");
      swapped.push_back(n);
    }
    std::sort(swapped.begin(), swapped.end());
    std::vector<std::string> got = reverse.uncompared;
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, swapped) << c.what << ": " << reverse.line;
    // In the JSON, for a CI job to read.
    auto j = ToJson(*other);
    EXPECT_EQ(j["verdict"]["complete"], false);
    EXPECT_EQ(j["verdict"]["uncompared"].size(), reverse.uncompared.size());
    // And not green on the page.
    EXPECT_NE(ToHtml(*other).find("class=\"verdict incomplete\""), std::string::npos) << c.what;
  }
  // A spread +Inf (or null) on both sides silenced a p50 moved x100: only the figures Build()
  // never marks (max, a burst's retransmits and TCP RTT) may have it.
  for (const nlohmann::json& spread : {nlohmann::json("+Inf"), nlohmann::json(nullptr)}) {
    nlohmann::json in = run, base_doc = ToJson(base);
    for (auto* d : {&in, &base_doc}) {
      (*d)[Ptr("/sections/0/rows/1/figures/p50_seconds/spread")] = spread;
    }
    in[Ptr("/sections/0/rows/1/figures/p50_seconds/value")] = 0.04;
    auto b = FromJson(base_doc, &error);
    ASSERT_TRUE(b) << error;
    Verdict v = judge(in, *b);
    EXPECT_FALSE(v.complete) << spread.dump() << ": " << v.line;
    EXPECT_EQ(v.uncompared,
              std::vector<std::string>{
                  "RTT same_zone icmp p50_seconds: spread not finite on either side"})
        << v.line;
  }
  // A max that became +Inf (a sample above every bucket) beside finite spreads changed.
  {
    nlohmann::json in = run, base_doc = ToJson(base);
    for (auto* d : {&in, &base_doc}) {
      (*d)[Ptr("/sections/0/rows/0/figures/max_seconds/spread")] = 0.0001;
    }
    in[Ptr("/sections/0/rows/0/figures/max_seconds/value")] = "+Inf";
    auto b = FromJson(base_doc, &error);
    ASSERT_TRUE(b) << error;
    Verdict v = judge(in, *b);
    ASSERT_EQ(v.changed.size(), 1u) << v.line;
    EXPECT_EQ(v.changed[0].figure, "max_seconds");
  }

  // Both sides empty: nothing compared is not "no change".
  nlohmann::json nothing = run;
  nothing["sections"] = nlohmann::json::array();
  auto empty_base = FromJson(nothing, &error);
  ASSERT_TRUE(empty_base) << error;
  Verdict none = judge(nothing, *empty_base);
  EXPECT_FALSE(none.complete);
  EXPECT_EQ(none.line,
            "Incomplete comparison: no figure on either side. No change beyond the run-to-run "
            "spread in 0 figures.");
}

// Names in a report file are printed with their control characters shown, not acted on: a
// terminal that shows the Markdown must not be driven by them.
TEST(ReportTest, ControlCharactersInNamesAreShownNotPrinted) {
  Recorded rec;
  rec.Peer("same", "same_node", Rtts(60e-6, 10e-6, 100, 13));
  RunInfo run = Probed();
  run.self_name = "client";
  nlohmann::json doctored = ToJson(Build(rec.registry.Collect(), run));
  doctored["run"]["self"]["name"] = "\x1b]0;owned\x07\x1b[2J";
  doctored["run"]["self"]["zone"] = std::string("z\0ne", 4);
  doctored["sections"][0]["rows"][0]["key"]["path_class"] = "same\x1b[31m_node";
  doctored["failures"] = {{{"probe", "rtt"},
                           {"target",
                            "\x9b"
                            "evil"},
                           {"reason", "r\rx"}}};
  doctored["sections"][0]["notes"][0] =
      "\xc2\x9b"
      "31m";
  std::string error;
  auto r = FromJson(doctored, &error);
  ASSERT_TRUE(r) << error;
  std::string md = ToMarkdown(*r);
  for (char c : md) {
    EXPECT_FALSE((static_cast<unsigned char>(c) < 0x20 && c != '\n') || c == 0x7F)
        << "control character " << static_cast<int>(c) << " in:\n"
        << md;
  }
  EXPECT_EQ(md.find("\xc2\x9b"), std::string::npos);
  EXPECT_NE(md.find("Prober `\\x1b]0;owned\\x07\\x1b[2J`"), std::string::npos) << md;
  EXPECT_NE(md.find("zone `z\\x00ne`"), std::string::npos) << md;
  // Outside a code span the shown backslash is itself escaped, so it stays a backslash.
  EXPECT_NE(md.find("| same\\\\x1b\\[31m_node |"), std::string::npos) << md;
  EXPECT_NE(md.find("- rtt → \\\\x9bevil: r\\\\x0dx"), std::string::npos) << md;
  EXPECT_NE(md.find("- \\\\u009b31m"), std::string::npos) << md;
}

// Names are shown as text in the Markdown, never as markup: a `|` adds no table cell, no raw
// HTML, link, emphasis or image survives, and a backtick does not end the prober's code span.
TEST(ReportTest, MarkdownInNamesIsShownNotRendered) {
  Recorded rec;
  rec.Peer("same", "same_node", Rtts(60e-6, 10e-6, 100, 23));
  nlohmann::json doctored = ToJson(Build(rec.registry.Collect(), Probed()));
  const std::string evil =
      "a | b <img src=x onerror=alert(1)> [x](http://e) ![i](http://e/i.png) **b** _u_ ~~s~~ "
      "`t` & \\";
  doctored["run"]["self"]["name"] = "x`` y`";
  doctored["run"]["self"]["zone"] = evil;
  doctored["sections"][0]["title"] = evil;
  doctored["sections"][0]["rows"][0]["key"]["path_class"] = evil;
  doctored["sections"][0]["notes"][0] = evil;
  doctored["failures"] = {{{"probe", "rtt"}, {"target", evil}, {"reason", evil}}};
  std::string error;
  auto r = FromJson(doctored, &error);
  ASSERT_TRUE(r) << error;
  std::string md = ToMarkdown(*r);
  // A code span's text is literal (the prober's line is checked below); all else is text.
  std::size_t prober = md.find("\nProber ");
  ASSERT_NE(prober, std::string::npos) << md;
  std::string text = md.substr(0, prober) + md.substr(md.find('\n', prober + 1));
  EXPECT_EQ(text.find("<img"), std::string::npos) << md;
  EXPECT_EQ(text.find("[x]"), std::string::npos) << md;
  EXPECT_EQ(text.find("![i]"), std::string::npos) << md;
  EXPECT_EQ(text.find(" **b**"), std::string::npos) << md;
  EXPECT_EQ(text.find(" _u_"), std::string::npos) << md;
  EXPECT_EQ(text.find(" ~~s~~"), std::string::npos) << md;
  const std::string shown =
      "a \\| b &lt;img src=x onerror=alert(1)&gt; \\[x\\](http://e) !\\[i\\](http://e/i.png) "
      "\\*\\*b\\*\\* \\_u\\_ \\~\\~s\\~\\~ \\`t\\` &amp; \\\\";
  EXPECT_NE(md.find("\n## " + shown + "\n"), std::string::npos) << md;
  EXPECT_NE(md.find("\n- " + shown + "\n"), std::string::npos) << md;
  EXPECT_NE(md.find("\n- rtt → " + shown + ": " + shown + "\n"), std::string::npos) << md;
  // A fence longer than the longest backtick run inside, padded where the text ends with one.
  EXPECT_NE(md.find("Prober ``` x`` y` ``` (node "), std::string::npos) << md;
  EXPECT_NE(md.find(", zone ``" + evil + "``)"), std::string::npos) << md;
  // Every line of the RTT table has as many cells as its header.
  auto cells = [](const std::string& line) {
    int n = 0;
    for (std::size_t i = 1; i < line.size(); ++i) n += line[i] == '|' && line[i - 1] != '\\';
    return n;
  };
  std::size_t at = md.find("\n|");
  ASSERT_NE(at, std::string::npos) << md;
  std::istringstream table(md.substr(at + 1));
  std::string line;
  std::getline(table, line);
  int header = cells(line);
  int rows = 0;
  while (std::getline(table, line) && !line.empty()) {
    EXPECT_EQ(cells(line), header) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 2) << md;  // the rule under the header and the one row
  EXPECT_NE(md.find("| " + shown + " | icmp |"), std::string::npos) << md;
}

// The JSON (as `report --format=json` writes it) of a report of 1,000 peers with every kind
// configured towards every peer; `failing`: every peer failed every kind, with error notes (the
// heaviest real report: a failure line and a note per peer and kind).
std::size_t ThousandPeerReportBytes(bool failing) {
  prometheus::Registry registry;
  auto counter = [&](const char* name) -> prometheus::Family<prometheus::Counter>& {
    return prometheus::BuildCounter().Name(name).Help(name).Register(registry);
  };
  auto& sent = counter("podnet_rtt_packets_sent_total");
  auto& received = counter("podnet_rtt_packets_received_total");
  auto& http = counter("podnet_http_requests_total");
  auto& grpc = counter("podnet_grpc_requests_total");
  auto& errors = counter("podnet_probe_errors_total");
  auto& bytes = counter("podnet_probe_sent_bytes_total");
  auto& rtt = prometheus::BuildHistogram().Name("podnet_rtt_seconds").Help("h").Register(registry);
  const char* paths[] = {"same_node", "same_zone", "cross_zone"};
  RunInfo run = Probed({"rtt", "http", "grpc", "burst", "dns"});
  run.interval_seconds = {{"rtt", 10}, {"http", 30}, {"grpc", 30}, {"burst", 900}, {"dns", 30}};
  std::mt19937 rng(14);
  for (int i = 0; i < 1000; ++i) {
    // A DaemonSet Pod's name: the DaemonSet's name and 5 random characters.
    std::string peer = "podnet-exporter-";
    for (int k = 0; k < 5; ++k) peer += "bcdfghjklmnpqrstvwxz2456789"[rng() % 27];
    std::string path = paths[i % 3];
    prometheus::Labels l{{"peer", peer}, {"path_class", path}, {"protocol", "icmp"}};
    sent.Add(l).Increment(20);
    received.Add(l).Increment(failing ? 0 : 20);
    rtt.Add(l, metrics::LatencyBuckets()).Observe(400e-6);
    for (const char* mode : {"keepalive", "new"}) {
      http.Add({{"peer", peer},
                {"path_class", path},
                {"connection", mode},
                {"code", failing ? "0" : "200"}})
          .Increment(40);
    }
    grpc.Add({{"peer", peer}, {"path_class", path}, {"code", failing ? "UNAVAILABLE" : "OK"}})
        .Increment(10);
    for (const char* kind : {"rtt", "http", "grpc", "burst"}) {
      bytes.Add({{"peer", peer}, {"path_class", path}, {"probe", kind}}).Increment(1e5);
      run.targets.push_back({kind, peer, path, 6});
      if (!failing) continue;
      errors.Add({{"probe", kind}, {"peer", peer}, {"path_class", path}, {"reason", "timeout"}})
          .Increment(20);
      errors.Add({{"probe", kind}, {"peer", peer}, {"path_class", path}, {"reason", "refused"}})
          .Increment(3);
    }
  }
  return ToJson(Build(registry.Collect(), run)).dump(2).size();
}

// The file size cap (kMaxReportBytes) against what a real report of 1,000 peers weighs: ten
// times the heaviest.
TEST(ReportTest, TheFileCapIsTenThousandPeerReports) {
  std::size_t healthy = ThousandPeerReportBytes(false);
  std::size_t failing = ThousandPeerReportBytes(true);
  std::printf(
      "a report of 1,000 peers: %zu bytes healthy, %zu bytes every peer failing; "
      "kMaxReportBytes %zu\n",
      healthy, failing, kMaxReportBytes);
  EXPECT_GT(failing, healthy);
  EXPECT_GE(kMaxReportBytes, 10 * failing);
  EXPECT_LT(kMaxReportBytes, 20 * failing);  // tied to the measurement, not a guess
}

}  // namespace
}  // namespace podnet::report
