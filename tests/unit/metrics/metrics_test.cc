#include "exporter/metrics/metrics.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

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
  config::Self self{"pod-a", "node-1", "zone-a"};
  auto labels = PeerLabels(self, MakePeer("pod-b", "node-2", "zone-b", topology::PathClass::kCrossZone));
  EXPECT_EQ(labels, (prometheus::Labels{{"source_node", "node-1"},
                                        {"source_zone", "zone-a"},
                                        {"peer", "pod-b"},
                                        {"peer_node", "node-2"},
                                        {"peer_zone", "zone-b"},
                                        {"path", "cross_zone"}}));
}

TEST(SeriesSetTest, RemoveAllRemovesExactlyItsSeries) {
  Metrics m;
  auto& errors = m.probe_errors();
  auto& sent = m.probe_sent_bytes();
  SeriesSet mine;
  mine.Add(errors, {{"peer", "a"}, {"reason", "socket"}}).Increment();
  mine.Add(sent, {{"peer", "a"}}).Increment(100);
  sent.Add({{"peer", "b"}}).Increment(7);  // someone else's series
  EXPECT_EQ(mine.size(), 2u);
  mine.RemoveAll();
  EXPECT_EQ(mine.size(), 0u);
  auto& r = m.registry();
  EXPECT_EQ(CounterValue(r, "podnet_probe_errors_total", {{"peer", "a"}}), -1);
  EXPECT_EQ(CounterValue(r, "podnet_probe_sent_bytes_total", {{"peer", "a"}}), -1);
  EXPECT_EQ(CounterValue(r, "podnet_probe_sent_bytes_total", {{"peer", "b"}}), 7);
  // RemoveAll again is harmless, and the set can be used anew.
  mine.RemoveAll();
  mine.Add(sent, {{"peer", "a"}}).Increment(1);
  EXPECT_EQ(CounterValue(r, "podnet_probe_sent_bytes_total", {{"peer", "a"}}), 1);
}

TEST(SeriesSetTest, AddingTheSameSeriesAgainIsRememberedOnce) {
  // A probe counts each failure through Add(...).Increment(): thousands of failures must not
  // make the set grow.
  Metrics m;
  SeriesSet set;
  prometheus::Counter* first = nullptr;
  for (int i = 0; i < 1000; ++i) {
    auto& c = set.Add(m.probe_errors(), {{"peer", "a"}, {"reason", "send_failed"}});
    if (first == nullptr) first = &c;
    EXPECT_EQ(&c, first);
    c.Increment();
  }
  set.Add(m.probe_errors(), {{"peer", "a"}, {"reason", "socket"}}).Increment();
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(CounterValue(m.registry(), "podnet_probe_errors_total", {{"reason", "send_failed"}}),
            1000);
  set.RemoveAll();
  EXPECT_EQ(CounterValue(m.registry(), "podnet_probe_errors_total", {{"peer", "a"}}), -1);
}

TEST(SeriesSetTest, DestructionKeepsTheSeries) {
  Metrics m;
  {
    SeriesSet set;
    set.Add(m.probe_sent_bytes(), {{"peer", "kept"}}).Increment(3);
  }
  EXPECT_EQ(CounterValue(m.registry(), "podnet_probe_sent_bytes_total", {{"peer", "kept"}}), 3);
}

double PeersGauge(Metrics& m, const char* path) {
  auto s = FindSeries(m.registry(), "podnet_peers", {{"path", path}});
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

}  // namespace
}  // namespace podnet::metrics
