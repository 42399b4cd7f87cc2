// The burst probe kind on loopback: its own responder, two loopback peers, the byte budget.

#include "exporter/probes/burst/burst_probe.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "exporter/metrics/metrics.h"
#include "exporter/responders/burst_server.h"
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

// The default configuration's case: two loopback peers, bursts of 1 and 4 streams, and a
// budget that one loopback burst alone would use up many times over. Loopback is not charged:
// every peer gets throughput for every stream count, and the budget is untouched.
TEST(BurstProbeTest, LoopbackBurstsAreNotChargedToTheBudget) {
  BurstResponderOptions ro;
  ro.listen_address = {boost::asio::ip::make_address("::"), 0};
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

}  // namespace
}  // namespace podnet::probes::burst
