// The burst probe kind on loopback: its own responder, two loopback peers, the byte budget.

#include "exporter/probes/burst/burst_probe.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exporter/metrics/metrics.h"
#include "exporter/probes/burst/coordination.h"
#include "exporter/responders/burst_server.h"
#include "exporter/topology/burst_pairs.h"
#include "exporter/topology/sample.h"
#include "tests/unit/testing/loop.h"

namespace podnet::probes::burst {
namespace {

using namespace std::chrono_literals;
using podnet::testing::CounterValue;
using podnet::testing::Eventually;
using podnet::testing::FindSeries;
using podnet::testing::LoopThread;

const topology::Self kSelf{"probe-a", "node-1", "zone-a"};

topology::Peer LoopbackPeer(const char* name, const char* address, std::uint16_t burst_port) {
  topology::Peer p;
  p.name = name;
  p.address = boost::asio::ip::make_address(address);
  p.burst_port = burst_port;
  p.node = "node-1";
  p.zone = "zone-a";
  p.path = topology::Classify(kSelf, p.node, p.zone);
  return p;
}

// A burst responder on [::]:0 with a registry of its own: every 127.0.0.x address reaches it.
struct SharedResponder {
  static BurstResponderOptions Options() {
    BurstResponderOptions ro;
    ro.listen_address = {boost::asio::ip::make_address("::"), 0};
    ro.any_client = true;  // no discovery here: every source, as with `clients: any`
    return ro;
  }
  metrics::Metrics metrics;
  responders::BurstResponder server{Options(), metrics.registry()};
};

// Discovered probe Pods "pod-<x>" on node "node-<x>", the i-th at 127.0.0.<i+1>, all bursting
// to `burst_port`.
std::vector<topology::Peer> LoopbackPods(
    std::initializer_list<std::pair<const char*, const char*>> names_zones,
    std::uint16_t burst_port) {
  std::vector<topology::Peer> pods;
  for (const auto& [name, zone] : names_zones) {
    topology::Peer p;
    p.name = name;
    p.node = std::string("node-") + (name + 4);
    p.zone = zone;
    p.address = boost::asio::ip::make_address("127.0.0." + std::to_string(pods.size() + 1));
    p.burst_port = burst_port;
    pods.push_back(p);
  }
  return pods;
}

// The default configuration's case: two loopback peers, bursts of 1 and 4 streams, and a
// budget that one loopback burst alone would use up many times over. Loopback is not charged:
// every peer gets throughput for every stream count, and the budget is untouched.
TEST(BurstProbeTest, LoopbackBurstsAreNotChargedToTheBudget) {
  BurstResponderOptions ro;
  ro.listen_address = {boost::asio::ip::make_address("::"), 0};
  ro.any_client = true;
  metrics::Metrics metrics;
  responders::BurstResponder responder(ro, metrics.registry());
  ASSERT_NE(responder.port(), 0);

  BurstOptions o;
  o.interval = 1s;  // jitter before a round: up to interval/10
  o.duration = 300ms;
  o.streams = {1, 4};
  o.max_bytes_per_hour = 2'000'000;  // a 300 ms loopback burst sends far more
  o.step_timeout = 2s;

  LoopThread loop;
  ProbeEnv env{loop.io(), metrics, kSelf};
  std::vector<topology::Peer> peers = {LoopbackPeer("loopback-v4", "127.0.0.1", responder.port()),
                                       LoopbackPeer("loopback-v6", "::1", responder.port())};
  std::vector<std::shared_ptr<PeerProbe>> probes;
  int done = 0;
  loop.Run([&] {
    auto kind = MakeBurstKind(o, env);
    for (const auto& p : peers) probes.push_back(kind->ForPeer(p));
  });
  // A peer never burst to has no path MTU series (not a 0).
  EXPECT_FALSE(FindSeries(metrics.registry(), "podnet_burst_path_mtu_bytes", {}));
  loop.Run([&] {
    for (auto& probe : probes) probe->Run(std::chrono::steady_clock::now(), [&] { ++done; });
  });
  ASSERT_TRUE(Eventually([&] { return loop.Run([&] { return done; }) == 2; }, 20000ms));

  for (const auto& p : peers) {
    for (const char* streams : {"1", "4"}) {
      auto t = FindSeries(metrics.registry(), "podnet_burst_throughput_bytes_per_second",
                          {{"peer", p.name}, {"streams", streams}});
      ASSERT_TRUE(t) << p.name << " streams " << streams;
      EXPECT_GT(t->gauge.value, 0) << p.name << " streams " << streams;
    }
    auto mtu = FindSeries(metrics.registry(), "podnet_burst_path_mtu_bytes", {{"peer", p.name}});
    ASSERT_TRUE(mtu) << p.name;
    EXPECT_GT(mtu->gauge.value, 0);
    double sent = CounterValue(metrics.registry(), "podnet_probe_sent_bytes_total",
                               {{"peer", p.name}, {"probe", "burst"}});
    EXPECT_GT(sent, static_cast<double>(o.max_bytes_per_hour)) << p.name;  // counted, not charged
    EXPECT_EQ(CounterValue(metrics.registry(), "podnet_probe_errors_total",
                           {{"peer", p.name}, {"probe", "burst"}, {"reason", "budget_exhausted"}}),
              -1);
  }
  auto remaining = FindSeries(metrics.registry(), "podnet_burst_budget_remaining_bytes", {});
  ASSERT_TRUE(remaining);
  EXPECT_EQ(remaining->gauge.value, static_cast<double>(o.max_bytes_per_hour));
  loop.Run([&] {
    for (auto& probe : probes) {
      probe->Cancel();
      probe->RemoveSeries();
    }
    probes.clear();
  });
}

// Coordinated bursts through the kind (peers.kubernetes): three Pods' exporters, each with its
// own ProbeEnv built from the same discovered list of four Pods in two zones (real burst
// responder on ::, the Pods on 127.0.0.1-4). Per ordered zone pair exactly one Pod of the source
// zone bursts, to a Pod of the peer zone, each burst within max_bytes_per_burst; the others
// count the pair as skipped. Series are per zone pair: no `peer` label.
TEST(BurstProbeTest, CoordinatedBurstsHaveOneProberPerZonePair) {
  SharedResponder responder;
  ASSERT_NE(responder.server.port(), 0);
  const auto pods = LoopbackPods(
      {{"pod-a1", "zone-a"}, {"pod-a2", "zone-a"}, {"pod-b1", "zone-b"}, {"pod-b2", "zone-b"}},
      responder.server.port());
  BurstOptions o;
  o.interval = 1s;
  o.duration = 300ms;
  o.streams = {1, 2};
  o.step_timeout = 2s;
  // One period for the next decades: every exporter of the test decides the same period.
  o.coordinated.period = std::chrono::hours(1'000'000);
  o.coordinated.max_bytes_per_burst = 5'000'000;  // a 300 ms loopback burst sends far more

  LoopThread loop;
  struct Pod {
    topology::Self self;
    std::unique_ptr<metrics::Metrics> metrics = std::make_unique<metrics::Metrics>();
    std::unique_ptr<ProbeEnv> env;
  };
  std::vector<Pod> exporters;
  for (int i : {0, 1, 2}) {  // pod-a1, pod-a2, pod-b1
    Pod pod;
    pod.self = {pods[i].name, pods[i].node, pods[i].zone};
    pod.env = std::make_unique<ProbeEnv>(ProbeEnv{loop.io(), *pod.metrics, pod.self});
    std::vector<topology::Peer> candidates = pods;
    for (auto& c : candidates) c.path = topology::Classify(pod.self, c.node, c.zone);
    pod.env->probe_pods = candidates;
    exporters.push_back(std::move(pod));
  }
  // One exporter at a time: the responder serves one test per source address at once, and
  // every test here comes from loopback.
  for (auto& pod : exporters) {
    std::shared_ptr<ProbeKind> kind;
    std::shared_ptr<PeerProbe> probe;
    bool done = false;
    loop.Run([&] {
      kind = MakeBurstKind(o, *pod.env);
      ASSERT_EQ(kind->Targets(), std::vector<std::string>{"coordinated"});
      probe = kind->ForTarget("coordinated");
      probe->Run(std::chrono::steady_clock::now(), [&] { done = true; });
    });
    ASSERT_TRUE(Eventually([&] { return loop.Run([&] { return done; }); }, 20000ms))
        << pod.self.name;
    loop.Run([&] { probe->Cancel(); });
  }

  const std::uint64_t period =
      topology::PeriodNumber(std::chrono::system_clock::now(), o.coordinated.period);
  for (const char* from : {"zone-a", "zone-b"}) {
    for (const char* to : {"zone-a", "zone-b"}) {
      auto pair = topology::ChooseBurstPair(period, from, to, pods);
      ASSERT_TRUE(pair);
      int probers = 0;
      for (auto& pod : exporters) {
        if (pod.self.zone != from) continue;
        auto& r = pod.metrics->registry();
        auto sent =
            FindSeries(r, "podnet_burst_sent_bytes_total", {{"peer_zone", to}, {"streams", "1"}});
        auto tp = FindSeries(r, "podnet_burst_throughput_bytes_per_second",
                             {{"peer_zone", to}, {"streams", "2"}});
        if (!sent) continue;
        ++probers;
        EXPECT_EQ(pod.self.name, pods[pair->prober].name) << from << " -> " << to;
        EXPECT_GT(sent->counter.value, 0) << pod.self.name << " -> " << to;
        EXPECT_LE(sent->counter.value, static_cast<double>(o.coordinated.max_bytes_per_burst));
        ASSERT_TRUE(tp) << pod.self.name << " -> " << to;
        EXPECT_GT(tp->gauge.value, 0);  // a burst of a set size: its rates stand
      }
      // zone-a has both its Pods here: exactly one bursts. zone-b has one of two (pod-b1).
      if (std::string(from) == "zone-a") {
        EXPECT_EQ(probers, 1) << from << " -> " << to;
      } else {
        EXPECT_EQ(probers, pods[pair->prober].name == "pod-b1" ? 1 : 0) << from << " -> " << to;
      }
    }
  }
  // Every Pod decided both of its zone's pairs: bursts plus skips = 2, and no series names a
  // peer (they are per zone pair).
  for (auto& pod : exporters) {
    auto& r = pod.metrics->registry();
    double skipped = std::max(
        0.0, CounterValue(r, "podnet_burst_pairs_skipped_total", {{"reason", "not_chosen"}}));
    int bursts = 0;
    for (const char* to : {"zone-a", "zone-b"}) {
      bursts +=
          FindSeries(r, "podnet_burst_sent_bytes_total", {{"peer_zone", to}, {"streams", "1"}}) ? 1
                                                                                                : 0;
    }
    EXPECT_EQ(bursts + skipped, 2) << pod.self.name;
    for (const auto& family : r.Collect()) {
      if (family.name.rfind("podnet_burst_", 0) != 0 &&
          family.name != "podnet_probe_sent_bytes_total") {
        continue;
      }
      for (const auto& m : family.metric) {
        for (const auto& l : m.label) EXPECT_NE(l.name, "peer") << family.name;
      }
    }
  }
}

// A Pod that is not a pair's prober in this period does not go on exporting the last period's
// throughput: at its first round of such a period the pair's last-burst gauges go, and its
// counters stay (continuous for rate()).
TEST(BurstProbeTest, CoordinatedGaugesGoInAPeriodWithoutABurst) {
  SharedResponder responder;
  ASSERT_NE(responder.server.port(), 0);
  const topology::Self self{"pod-a1", "node-a1", "zone-a"};
  auto pods = LoopbackPods({{"pod-a1", "zone-a"}, {"pod-a2", "zone-a"}, {"pod-b1", "zone-b"}},
                           responder.server.port());
  for (auto& p : pods) p.path = topology::Classify(self, p.node, p.zone);
  // A period in which pod-a1 is the prober of zone-a -> zone-b, and a later one in which it is
  // not (deterministic hashes: found by looking).
  auto prober_is_self = [&](std::uint64_t period) {
    auto pair = topology::ChooseBurstPair(period, "zone-a", "zone-b", pods);
    return pair && pods[pair->prober].name == self.name;
  };
  std::uint64_t chosen = 1000;
  while (!prober_is_self(chosen)) ++chosen;
  std::uint64_t skipped = chosen + 1;
  while (prober_is_self(skipped)) ++skipped;

  BurstOptions o;
  o.interval = 1s;
  o.duration = 200ms;
  o.streams = {1};
  o.step_timeout = 2s;
  o.coordinated.period = std::chrono::hours(1);
  o.coordinated.max_bytes_per_burst = 5'000'000;
  metrics::Metrics metrics;
  LoopThread loop;
  ProbeEnv env{loop.io(), metrics, self};
  env.probe_pods = pods;
  std::chrono::system_clock::time_point now;
  env.wall_clock = [&] { return now; };
  std::shared_ptr<ProbeKind> kind;
  std::shared_ptr<PeerProbe> probe;
  loop.Run([&] {
    kind = MakeBurstKind(o, env);
    probe = kind->ForTarget("coordinated");
  });
  auto round_in = [&](std::uint64_t period) {
    bool done = false;
    loop.Run([&] {
      now = std::chrono::system_clock::time_point{std::chrono::hours(period) + 1s};
      probe->Run(std::chrono::steady_clock::now(), [&] { done = true; });
    });
    return Eventually([&] { return loop.Run([&] { return done; }); }, 20000ms);
  };
  const prometheus::Labels to_b{{"peer_zone", "zone-b"}, {"streams", "1"}};

  ASSERT_TRUE(round_in(chosen));
  auto tp = FindSeries(metrics.registry(), "podnet_burst_throughput_bytes_per_second", to_b);
  ASSERT_TRUE(tp);
  EXPECT_GT(tp->gauge.value, 0);
  EXPECT_TRUE(
      FindSeries(metrics.registry(), "podnet_burst_path_mtu_bytes", {{"peer_zone", "zone-b"}}));
  double sent = CounterValue(metrics.registry(), "podnet_burst_sent_bytes_total", to_b);
  EXPECT_GT(sent, 0);

  ASSERT_TRUE(round_in(skipped));
  for (const char* gauge :
       {"podnet_burst_throughput_bytes_per_second", "podnet_burst_tcp_rtt_seconds",
        "podnet_burst_snd_cwnd_bytes", "podnet_burst_interval_min_throughput_bytes_per_second"}) {
    EXPECT_FALSE(FindSeries(metrics.registry(), gauge, to_b)) << gauge;
  }
  EXPECT_FALSE(
      FindSeries(metrics.registry(), "podnet_burst_path_mtu_bytes", {{"peer_zone", "zone-b"}}));
  EXPECT_EQ(CounterValue(metrics.registry(), "podnet_burst_sent_bytes_total", to_b), sent);
  EXPECT_GE(CounterValue(metrics.registry(), "podnet_burst_pairs_skipped_total",
                         {{"reason", "not_chosen"}}),
            1);
  loop.Run([&] { probe->Cancel(); });
}

}  // namespace
}  // namespace podnet::probes::burst
