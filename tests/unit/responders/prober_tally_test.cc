#include "exporter/responders/prober_tally.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <thread>

#include "tests/unit/testing/loop.h"

namespace podnet::responders {
namespace {

using namespace std::chrono_literals;
using boost::asio::ip::make_address;
using Clock = ProberTally::Clock;

const Clock::time_point kFirstHeard = Clock::time_point{} + 1h;
constexpr char kName[] = "podnet_responder_probers";

// Two probers in this Pod's zone "a" (one on its node), three in zone "b".
std::vector<KnownProber> Fleet() {
  return {{make_address("10.0.0.1"), "a", "same_node"},
          {make_address("10.0.0.2"), "a", "same_zone"},
          {make_address("10.1.0.1"), "b", "cross_zone"},
          {make_address("10.1.0.2"), "b", "cross_zone"},
          {make_address("10.1.0.3"), "b", "cross_zone"}};
}

class ProberTallyTest : public ::testing::Test {
 protected:
  ProberTallyTest() : tally_(registry_, 300s) {
    tally_.SetSelf("node-a1", "a");
    tally_.SetProbers(Fleet());
  }
  double Probers(const std::string& zone, const std::string& path_class,
                 const std::string& node = "node-a1") {
    auto m = testing::FindSeries(
        registry_, kName, {{"peer_node", node}, {"source_zone", zone}, {"path_class", path_class}});
    return m ? m->gauge.value : -1;
  }
  prometheus::Registry registry_;
  ProberTally tally_;
};

TEST_F(ProberTallyTest, CountsDistinctProbersPerZoneAndPathClass) {
  // One prober heard many times counts once; a stranger and an ad-hoc client count nothing.
  for (int i = 0; i < 100; ++i) tally_.Heard(make_address("10.1.0.1"), kFirstHeard + i * 1ms);
  tally_.Heard(make_address("10.1.0.3"), kFirstHeard);
  tally_.Heard(make_address("10.0.0.1"), kFirstHeard);
  tally_.Heard(make_address("192.0.2.9"), kFirstHeard);
  tally_.Heard(make_address("::ffff:10.0.0.2"), kFirstHeard);  // IPv4-mapped: the same prober
  tally_.Publish(kFirstHeard + 1s);
  EXPECT_EQ(Probers("b", "cross_zone"), 2);
  EXPECT_EQ(Probers("a", "same_zone"), 1);
  EXPECT_EQ(Probers("a", "same_node"), 1);
  auto series = testing::FindSeries(registry_, kName, {{"peer_zone", "a"}, {"source_zone", "b"}});
  EXPECT_TRUE(series.has_value()) << "peer_zone is this Pod's zone";
}

TEST_F(ProberTallyTest, AZoneNobodyWasHeardFromIsZeroNotAbsent) {
  tally_.Heard(make_address("10.0.0.2"), kFirstHeard);
  tally_.Publish(kFirstHeard);
  EXPECT_EQ(Probers("b", "cross_zone"), 0);
  EXPECT_EQ(Probers("a", "same_zone"), 1);
}

TEST_F(ProberTallyTest, AProberOutOfTheWindowNoLongerCounts) {
  tally_.Heard(make_address("10.1.0.1"), kFirstHeard);
  tally_.Heard(make_address("10.1.0.2"), kFirstHeard + 200s);
  tally_.Publish(kFirstHeard + 300s);
  EXPECT_EQ(Probers("b", "cross_zone"), 2);
  tally_.Publish(kFirstHeard + 301s);
  EXPECT_EQ(Probers("b", "cross_zone"), 1);
  tally_.Publish(kFirstHeard + 501s);
  EXPECT_EQ(Probers("b", "cross_zone"), 0);
}

TEST_F(ProberTallyTest, ANewListKeepsWhenProbersWereHeardAndDropsGoneGroups) {
  tally_.Heard(make_address("10.1.0.1"), kFirstHeard);
  tally_.Heard(make_address("10.0.0.1"), kFirstHeard);
  tally_.Publish(kFirstHeard);
  ASSERT_EQ(Probers("a", "same_node"), 1);
  // The Pod on this node left (a rollout's old Pod); 10.1.0.1 stays, a new zone appears.
  auto next = Fleet();
  next.erase(next.begin());
  next.push_back({make_address("10.2.0.1"), "c", "cross_zone"});
  tally_.SetProbers(next);
  tally_.Publish(kFirstHeard + 1s);
  EXPECT_EQ(Probers("a", "same_node"), -1) << "a group without probe Pods has no series";
  EXPECT_EQ(Probers("b", "cross_zone"), 1);
  EXPECT_EQ(Probers("c", "cross_zone"), 0);
  // A prober that left is not counted when it is heard again, as a stranger.
  tally_.Heard(make_address("10.0.0.1"), kFirstHeard + 2s);
  tally_.Publish(kFirstHeard + 2s);
  EXPECT_EQ(Probers("a", "same_zone"), 0);
}

TEST_F(ProberTallyTest, ARepeatedAddressKeepsItsFirstEntryAndOnlyItsGroup) {
  // A discovered probe Pod that is also a static peer without a zone: the first (discovered)
  // entry names its zone; the static one's "unknown" group gets no series of its own.
  auto next = Fleet();
  next.push_back({make_address("::ffff:10.1.0.1"), "", "unknown"});
  tally_.SetProbers(next);
  tally_.Heard(make_address("10.1.0.1"), kFirstHeard);
  tally_.Publish(kFirstHeard);
  EXPECT_EQ(Probers("b", "cross_zone"), 1);
  EXPECT_EQ(Probers("", "unknown"), -1);
}

TEST_F(ProberTallyTest, ANewSelfMovesEverySeries) {
  tally_.Heard(make_address("10.1.0.1"), kFirstHeard);
  tally_.Publish(kFirstHeard);
  tally_.SetSelf("node-a1", "a");  // unchanged: nothing removed
  EXPECT_EQ(Probers("b", "cross_zone"), 1);
  tally_.SetSelf("node-a2", "a");
  EXPECT_EQ(Probers("b", "cross_zone"), -1);
  tally_.Publish(kFirstHeard);
  EXPECT_EQ(Probers("b", "cross_zone", "node-a2"), 1);
}

TEST(ProberTallyWithoutSelfTest, PublishesNothingUntilItKnowsWhoItIs) {
  prometheus::Registry registry;
  ProberTally tally(registry);
  tally.SetProbers(Fleet());
  tally.Heard(make_address("10.1.0.1"), kFirstHeard);
  tally.Publish(kFirstHeard);
  EXPECT_FALSE(testing::FindSeries(registry, kName, {}).has_value());
  EXPECT_EQ(tally.window(), ProberTally::kDefaultWindow);
}

TEST(ProberTallyThreadsTest, HeardFromManyThreadsBesidePublish) {
  // gRPC's threads and the responder loop at once (TSan checks the lock).
  prometheus::Registry registry;
  ProberTally tally(registry);
  tally.SetSelf("n", "a");
  tally.SetProbers(Fleet());
  std::vector<std::thread> threads;
  for (const auto& p : Fleet()) {
    threads.emplace_back([&tally, a = p.address] {
      for (int i = 0; i < 1000; ++i) tally.Heard(a, kFirstHeard + i * 1ms);
    });
  }
  for (int i = 0; i < 100; ++i) tally.Publish(kFirstHeard + 2s);
  for (auto& t : threads) t.join();
  tally.Publish(kFirstHeard + 2s);
  auto m = testing::FindSeries(registry, kName, {{"source_zone", "b"}});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->gauge.value, 3);
}

}  // namespace
}  // namespace podnet::responders
