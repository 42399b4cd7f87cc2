#include "exporter/metrics/metrics.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <string_view>
#include <vector>

#include "tests/unit/testing/gzip.h"
#include "tests/unit/testing/loop.h"

namespace podnet::metrics {
namespace {

using podnet::testing::CounterValue;
using podnet::testing::FindSeries;

topology::Peer MakePeer(std::string name, std::string node, std::string zone,
                        topology::PathClass path) {
  topology::Peer p;
  p.name = std::move(name);
  p.address = boost::asio::ip::make_address("10.0.0.1");
  p.node = std::move(node);
  p.zone = std::move(zone);
  p.path = path;
  return p;
}

TEST(PeerLabelsTest, TheSixPeerLabels) {
  topology::Self self{"pod-a", "node-1", "zone-a"};
  auto labels =
      PeerLabels(self, MakePeer("pod-b", "node-2", "zone-b", topology::PathClass::kCrossZone),
                 PeerLabelSet::kPerPeer);
  EXPECT_EQ(labels, (prometheus::Labels{{"source_node", "node-1"},
                                        {"source_zone", "zone-a"},
                                        {"peer", "pod-b"},
                                        {"peer_node", "node-2"},
                                        {"peer_zone", "zone-b"},
                                        {"path_class", "cross_zone"}}));
}

TEST(PeerLabelsTest, AggregatedDropsPeerAndPeerNode) {
  topology::Self self{"pod-a", "node-1", "zone-a"};
  auto b = PeerLabels(self, MakePeer("pod-b", "node-2", "zone-b", topology::PathClass::kCrossZone),
                      PeerLabelSet::kAggregated);
  auto c = PeerLabels(self, MakePeer("pod-c", "node-3", "zone-b", topology::PathClass::kCrossZone),
                      PeerLabelSet::kAggregated);
  EXPECT_EQ(b, (prometheus::Labels{{"source_node", "node-1"},
                                   {"source_zone", "zone-a"},
                                   {"peer_zone", "zone-b"},
                                   {"path_class", "cross_zone"}}));
  EXPECT_EQ(b, c);  // two peers of one zone: one label set
  auto other_zone =
      PeerLabels(self, MakePeer("pod-d", "node-4", "zone-c", topology::PathClass::kCrossZone),
                 PeerLabelSet::kAggregated);
  EXPECT_NE(b, other_zone);
}

TEST(SeriesSetTest, RemoveAllRemovesExactlyItsSeries) {
  Metrics m;
  auto& errors = m.probe_errors();
  auto& sent = m.probe_sent_bytes();
  SeriesSet mine(m.series_refs());
  mine.Add(errors, {{"peer", "a"}, {"reason", "socket"}}).Increment();
  mine.Add(sent, {{"peer", "a"}}).Increment(100);
  sent.Add({{"peer", "b"}}).Increment(7);  // someone else's series
  EXPECT_EQ(mine.size(), 2u);
  mine.RemoveAll();
  EXPECT_EQ(mine.size(), 0u);
  auto& r = m.registry();
  EXPECT_EQ(CounterValue(r, "podnet_probe_errors_total", {{"peer", "a"}, {"reason", "socket"}}),
            -1);
  EXPECT_EQ(CounterValue(r, "podnet_probe_sent_bytes_total", {{"peer", "a"}}), -1);
  EXPECT_EQ(CounterValue(r, "podnet_probe_sent_bytes_total", {{"peer", "b"}}), 7);
  // RemoveAll again is harmless, and the set can be used anew.
  mine.RemoveAll();
  mine.Add(sent, {{"peer", "a"}}).Increment(1);
  EXPECT_EQ(CounterValue(r, "podnet_probe_sent_bytes_total", {{"peer", "a"}}), 1);
}

TEST(SeriesSetTest, RemoveOneSeriesKeepsTheRestAndSharedOnes) {
  Metrics m;
  auto& sent = m.probe_sent_bytes();
  SeriesSet mine(m.series_refs());
  SeriesSet other(m.series_refs());
  auto& a = mine.Add(sent, {{"peer", "a"}});
  a.Increment(1);
  mine.Add(sent, {{"peer", "b"}}).Increment(2);
  auto& shared = mine.Add(sent, {{"peer", "s"}});
  other.Add(sent, {{"peer", "s"}}).Increment(3);  // another set feeds it too
  auto& r = m.registry();
  mine.Remove(&a);
  EXPECT_EQ(mine.size(), 2u);
  EXPECT_EQ(CounterValue(r, "podnet_probe_sent_bytes_total", {{"peer", "a"}}), -1);
  EXPECT_EQ(CounterValue(r, "podnet_probe_sent_bytes_total", {{"peer", "b"}}), 2);
  mine.Remove(&a);  // no longer held: ignored
  mine.Remove(&shared);
  EXPECT_EQ(CounterValue(r, "podnet_probe_sent_bytes_total", {{"peer", "s"}}), 3);
  other.RemoveAll();  // the last user goes: now it is removed
  EXPECT_EQ(CounterValue(r, "podnet_probe_sent_bytes_total", {{"peer", "s"}}), -1);
  // Added again after its removal, it is a new series held (and removed) once.
  mine.Add(sent, {{"peer", "a"}}).Increment(5);
  EXPECT_EQ(CounterValue(r, "podnet_probe_sent_bytes_total", {{"peer", "a"}}), 5);
  mine.RemoveAll();
  EXPECT_EQ(CounterValue(r, "podnet_probe_sent_bytes_total", {{"peer", "a"}}), -1);
  EXPECT_EQ(CounterValue(r, "podnet_probe_sent_bytes_total", {{"peer", "b"}}), -1);
}

TEST(SeriesSetTest, AddingTheSameSeriesAgainIsRememberedOnce) {
  // A probe counts each failure through Add(...).Increment(): thousands of failures must not
  // make the set grow.
  Metrics m;
  SeriesSet set(m.series_refs());
  prometheus::Counter* first = nullptr;
  for (int i = 0; i < 1000; ++i) {
    auto& c = set.Add(m.probe_errors(), {{"peer", "a"}, {"reason", "send_failed"}});
    if (first == nullptr) first = &c;
    EXPECT_EQ(&c, first);
    c.Increment();
  }
  set.Add(m.probe_errors(), {{"peer", "a"}, {"reason", "socket"}}).Increment();
  EXPECT_EQ(set.size(), 2u);
  auto errors = [&](const char* reason) {
    return CounterValue(m.registry(), "podnet_probe_errors_total",
                        {{"peer", "a"}, {"reason", reason}});
  };
  EXPECT_EQ(errors("send_failed"), 1000);
  EXPECT_EQ(errors("socket"), 1);
  set.RemoveAll();
  // Each series by its exact label set: {peer="a"} alone would match both.
  EXPECT_EQ(errors("send_failed"), -1);
  EXPECT_EQ(errors("socket"), -1);
}

TEST(SeriesSetTest, DestructionKeepsTheSeries) {
  Metrics m;
  {
    SeriesSet set(m.series_refs());
    set.Add(m.probe_sent_bytes(), {{"peer", "kept"}}).Increment(3);
  }
  EXPECT_EQ(CounterValue(m.registry(), "podnet_probe_sent_bytes_total", {{"peer", "kept"}}), 3);
}

TEST(SeriesSetTest, ASharedSeriesGoesWithItsLastUser) {
  Metrics m;
  auto& sent = m.probe_sent_bytes();
  SeriesSet a(m.series_refs());
  SeriesSet b(m.series_refs());
  SeriesSet c(m.series_refs());
  const prometheus::Labels shared{{"peer_zone", "z"}, {"probe", "rtt"}};
  auto& from_a = a.Add(sent, shared);
  auto& from_b = b.Add(sent, shared);
  EXPECT_EQ(&from_a, &from_b);
  from_a.Increment(3);
  from_b.Increment(4);
  c.Add(sent, {{"peer_zone", "other"}, {"probe", "rtt"}}).Increment(1);
  EXPECT_EQ(m.series_refs()->users(&from_a), 2u);
  a.Add(sent, shared);  // again from a: still two users
  EXPECT_EQ(m.series_refs()->users(&from_a), 2u);
  auto value = [&](const char* zone) {
    return CounterValue(m.registry(), "podnet_probe_sent_bytes_total",
                        {{"peer_zone", zone}, {"probe", "rtt"}});
  };
  EXPECT_EQ(value("z"), 7);
  a.RemoveAll();  // b still feeds it
  EXPECT_EQ(value("z"), 7);
  EXPECT_EQ(m.series_refs()->users(&from_b), 1u);
  from_b.Increment(1);
  EXPECT_EQ(value("z"), 8);
  b.RemoveAll();  // the last user
  EXPECT_EQ(value("z"), -1);
  EXPECT_EQ(value("other"), 1);  // c's own series untouched
  EXPECT_EQ(m.series_refs()->users(&from_b), 0u);
}

TEST(SeriesSetTest, ADestroyedSetLetsGoWithoutRemoving) {
  // A set destroyed without RemoveAll (shutdown, a restart) keeps its series but no longer
  // counts as a user: the other set's RemoveAll then removes the series.
  Metrics m;
  auto& sent = m.probe_sent_bytes();
  SeriesSet stays(m.series_refs());
  prometheus::Counter* series = &stays.Add(sent, {{"peer_zone", "z"}});
  {
    SeriesSet gone(m.series_refs());
    gone.Add(sent, {{"peer_zone", "z"}}).Increment(2);
    EXPECT_EQ(m.series_refs()->users(series), 2u);
  }
  EXPECT_EQ(m.series_refs()->users(series), 1u);
  EXPECT_EQ(CounterValue(m.registry(), "podnet_probe_sent_bytes_total", {{"peer_zone", "z"}}), 2);
  stays.RemoveAll();
  EXPECT_EQ(CounterValue(m.registry(), "podnet_probe_sent_bytes_total", {{"peer_zone", "z"}}), -1);
}

TEST(FindSeriesTest, SeveralMatchesFailNamingEveryLabelSet) {
  // The test helper itself: a label subset that picks out two series must fail the test (and
  // name both), not read as "no such series".
  Metrics m;
  m.probe_errors().Add({{"peer", "a"}, {"reason", "socket"}}).Increment();
  m.probe_errors().Add({{"peer", "a"}, {"reason", "send_failed"}}).Increment();
  double got = 0;
  EXPECT_NONFATAL_FAILURE(
      got = CounterValue(m.registry(), "podnet_probe_errors_total", {{"peer", "a"}}),
      "2 series match the labels given, want one");
  EXPECT_EQ(got, -1);
  EXPECT_NONFATAL_FAILURE(CounterValue(m.registry(), "podnet_probe_errors_total", {{"peer", "a"}}),
                          "{peer=\"a\", reason=\"send_failed\"}");
  EXPECT_EQ(CounterValue(m.registry(), "podnet_probe_errors_total",
                         {{"peer", "a"}, {"reason", "socket"}}),
            1);
  EXPECT_EQ(CounterValue(m.registry(), "podnet_probe_errors_total", {{"peer", "b"}}), -1);
}

double PeersGauge(Metrics& m, const char* path) {
  auto s = FindSeries(m.registry(), "podnet_peers", {{"path_class", path}});
  return s ? s->gauge.value : -1;
}

TEST(MetricsTest, SetPeersCountsEveryPathClassZerosIncluded) {
  Metrics m;
  for (const char* p : {"same_node", "same_zone", "cross_zone", "unknown"}) {
    EXPECT_EQ(PeersGauge(m, p), 0) << p;
  }
  using topology::PathClass;
  m.SetPeers({MakePeer("a", "n1", "z1", PathClass::kSameZone),
              MakePeer("b", "n2", "z1", PathClass::kSameZone),
              MakePeer("c", "n3", "z2", PathClass::kCrossZone)});
  EXPECT_EQ(PeersGauge(m, "same_node"), 0);
  EXPECT_EQ(PeersGauge(m, "same_zone"), 2);
  EXPECT_EQ(PeersGauge(m, "cross_zone"), 1);
  EXPECT_EQ(PeersGauge(m, "unknown"), 0);
  // A later list replaces the counts; classes that emptied go back to 0.
  m.SetPeers({MakePeer("d", "n1", "", PathClass::kUnknown)});
  EXPECT_EQ(PeersGauge(m, "same_zone"), 0);
  EXPECT_EQ(PeersGauge(m, "cross_zone"), 0);
  EXPECT_EQ(PeersGauge(m, "unknown"), 1);
}

TEST(MetricsTest, ReloadOutcome) {
  Metrics m;
  auto gauge = [&](const char* name) {
    auto s = FindSeries(m.registry(), name, {});
    return s ? s->gauge.value : -1;
  };
  m.SetReloadOutcome(true, 1700000000);
  EXPECT_EQ(gauge("podnet_config_last_reload_successful"), 1);
  EXPECT_EQ(gauge("podnet_config_last_reload_success_timestamp_seconds"), 1700000000);
  // A failed reload keeps the time of the last success.
  m.SetReloadOutcome(false, 1700000100);
  EXPECT_EQ(gauge("podnet_config_last_reload_successful"), 0);
  EXPECT_EQ(gauge("podnet_config_last_reload_success_timestamp_seconds"), 1700000000);
}

TEST(MetricsTest, BuildInfoInExposition) {
  Metrics m;
  std::string text = m.Serialize();
  EXPECT_NE(text.find("# TYPE podnet_build_info gauge"), std::string::npos) << text;
  EXPECT_NE(text.find("podnet_build_info{revision=\""), std::string::npos) << text;
}

using testing::Gunzip;

// A registry whose text is many 64 KiB chunks long, with a histogram whose bounds print long
// (8e-05 comes out of the library as 8.000000000000001e-05).
void FillLarge(Metrics& m, int peers) {
  auto& family = prometheus::BuildHistogram()
                     .Name("podnet_test_seconds")
                     .Help("Test histogram.")
                     .Register(m.registry());
  for (int i = 0; i < peers; ++i) {
    family
        .Add({{"peer", "peer-with-a-longish-name-" + std::to_string(i)},
              {"path_class", "same_zone"}},
             std::vector<double>{1e-05, 8e-05, 6e-04, 0.1, 1.5})
        .Observe(7e-05 * (i % 3));
  }
}

// The text without the process_* families, whose values (CPU, memory) move between scrapes.
std::string WithoutProcess(const std::string& text) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::size_t end = nl == std::string::npos ? text.size() : nl + 1;
    std::string_view line(text.data() + pos, end - pos);
    if (line.find("process_") == std::string_view::npos &&
        line.find("podnet_heap_allocated_bytes") == std::string_view::npos) {
      out.append(line);
    }
    pos = end;
  }
  return out;
}

TEST(SerializeTest, LargeTextStreamsWholeLinesAndShortensEveryBound) {
  Metrics m;
  const int peers = 3000;  // ~1.3 MB of text: ~20 chunks, so lines straddle chunk ends
  FillLarge(m, peers);
  std::string text = m.Serialize();
  ASSERT_GT(text.size(), 16 * 64 * 1024u);
  EXPECT_EQ(text.find("0.0005999"), std::string::npos);
  EXPECT_EQ(text.find("8.000000000000001e-05"), std::string::npos);
  // Every series' lines, each whole: 6 buckets (+Inf included), _sum, _count.
  std::size_t bucket_lines = 0, short_8e5 = 0, short_6e4 = 0;
  std::size_t pos = 0;
  for (std::size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', pos)) {
    std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    if (line.rfind("podnet_test_seconds_bucket{", 0) != 0) continue;
    ++bucket_lines;
    if (line.find(",le=\"8e-05\"}") != std::string_view::npos) ++short_8e5;
    if (line.find(",le=\"0.0006\"}") != std::string_view::npos) ++short_6e4;
  }
  EXPECT_EQ(pos, text.size());  // ends with a newline
  EXPECT_EQ(bucket_lines, 6u * peers);
  EXPECT_EQ(short_8e5, static_cast<std::size_t>(peers));
  EXPECT_EQ(short_6e4, static_cast<std::size_t>(peers));
  // The next scrape (reserved at this one's size) is the same text.
  EXPECT_EQ(WithoutProcess(m.Serialize()), WithoutProcess(text));
}

TEST(SerializeTest, GzipIsTheSameTextCompressed) {
  Metrics m;
  FillLarge(m, 3000);
  std::string text = m.Serialize();
  std::string gz = m.Serialize(Metrics::Encoding::kGzip);
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // gzip magic (RFC 1952 §2.3.1)
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_LT(gz.size() * 5, text.size()) << "repetitive text should shrink at least 5x";
  EXPECT_EQ(WithoutProcess(Gunzip(gz)), WithoutProcess(text));
  // A small registry too (the body is finished in one pass).
  Metrics small;
  EXPECT_EQ(WithoutProcess(Gunzip(small.Serialize(Metrics::Encoding::kGzip))),
            WithoutProcess(small.Serialize()));
}

}  // namespace
}  // namespace podnet::metrics
