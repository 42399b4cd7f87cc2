// PeriodLatch: each Pod decides each zone pair once per period, so a Pod leaving mid-period
// does not hand its pair to a second prober in the same period.

#include "exporter/probes/burst/coordination.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "exporter/topology/burst_pairs.h"

namespace podnet::probes::burst {
namespace {

using namespace std::chrono_literals;

std::vector<topology::Peer> Pods(int zones, int per_zone) {
  std::vector<topology::Peer> pods;
  for (int z = 0; z < zones; ++z) {
    for (int i = 0; i < per_zone; ++i) {
      topology::Peer p;
      p.name = "pod-" + std::string(1, static_cast<char>('a' + z)) + std::to_string(i);
      p.node = "node-" + p.name;
      p.zone = "zone-" + std::string(1, static_cast<char>('a' + z));
      pods.push_back(p);
    }
  }
  return pods;
}

topology::Self SelfOf(const topology::Peer& p) { return {p.name, p.node, p.zone}; }

// Every Pod's latch decides from `list`; returns (source zone, peer zone) -> probers.
std::map<std::pair<std::string, std::string>, std::vector<std::string>> DecideAll(
    std::map<std::string, PeriodLatch>& latches, std::uint64_t period,
    const std::vector<topology::Peer>& list) {
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> probers;
  for (const auto& pod : list) {
    auto d = latches[pod.name].Decide(period, SelfOf(pod), list);
    for (const auto& peer : d.targets) probers[{pod.zone, peer.zone}].push_back(pod.name);
  }
  return probers;
}

TEST(CoordinationTest, EachPairHasOneProberPerPeriodAndEveryOtherPodSkips) {
  auto pods = Pods(3, 4);
  std::map<std::string, PeriodLatch> latches;
  std::size_t not_chosen = 0;
  std::size_t targets = 0;
  for (const auto& pod : pods) {
    auto d = latches[pod.name].Decide(7, SelfOf(pod), pods);
    not_chosen += d.not_chosen;
    targets += d.targets.size();
    EXPECT_EQ(d.not_listed, 0u);
    EXPECT_EQ(d.targets.size() + d.not_chosen, 3u) << pod.name;  // one decision per zone
    // The same round again decides nothing: the pairs are decided for the period.
    auto again = latches[pod.name].Decide(7, SelfOf(pod), pods);
    EXPECT_TRUE(again.targets.empty());
    EXPECT_EQ(again.not_chosen, 0u);
  }
  EXPECT_EQ(targets, 9u);  // 3 zones -> 3 zones
  EXPECT_EQ(not_chosen, 12u * 3 - 9);
}

// Discovered probe Pods are named after their nodes (the `peer` label), each Pod's own name in
// `pod`: a Pod finds itself in the list by its Pod name, and each pair still has one prober.
TEST(CoordinationTest, PodsNamedAfterTheirNodesFindThemselves) {
  auto pods = Pods(3, 4);
  for (auto& p : pods) {
    p.pod = p.name;
    p.name = p.node;
  }
  std::map<std::string, PeriodLatch> latches;
  std::size_t targets = 0;
  for (const auto& pod : pods) {
    topology::Self self{pod.pod, pod.node, pod.zone};
    auto d = latches[pod.pod].Decide(7, self, pods);
    EXPECT_EQ(d.not_listed, 0u) << pod.pod;
    EXPECT_EQ(d.targets.size() + d.not_chosen, 3u) << pod.pod;
    for (const auto& t : d.targets) EXPECT_NE(t.pod, pod.pod) << "a Pod chose itself";
    targets += d.targets.size();
  }
  EXPECT_EQ(targets, 9u);
}

TEST(CoordinationTest, APodLeavingMidPeriodLeavesThePairToTheNextPeriod) {
  auto pods = Pods(3, 4);
  std::map<std::string, PeriodLatch> latches;
  auto first = DecideAll(latches, 40, pods);
  ASSERT_EQ(first.size(), 9u);
  for (const auto& [pair, who] : first) ASSERT_EQ(who.size(), 1u) << pair.first;
  // The prober of zone-a -> zone-b leaves (its endpoint goes: not ready, or deleted).
  const std::string gone = first[{"zone-a", "zone-b"}][0];
  std::vector<topology::Peer> after;
  for (const auto& p : pods) {
    if (p.name != gone) after.push_back(p);
  }
  // Without the latch the next-highest Pod of zone-a would now act in the same period.
  auto pair = topology::ChooseBurstPair(40, "zone-a", "zone-b", after);
  ASSERT_TRUE(pair);
  EXPECT_NE(after[pair->prober].name, gone);
  // With it, nobody else acts in period 40: the pair had its one prober.
  EXPECT_TRUE(DecideAll(latches, 40, after).empty());
  // The next period picks again, from the Pods that are left: one prober per pair.
  auto next = DecideAll(latches, 41, after);
  ASSERT_EQ(next.size(), 9u);
  for (const auto& [p, who] : next) {
    ASSERT_EQ(who.size(), 1u);
    EXPECT_NE(who[0], gone);
  }
}

TEST(CoordinationTest, APodNotInItsOwnListWaitsForTheNextPeriod) {
  auto pods = Pods(2, 3);
  topology::Self self = SelfOf(pods[0]);
  std::vector<topology::Peer> without(pods.begin() + 1, pods.end());
  PeriodLatch latch;
  auto d = latch.Decide(3, self, without);
  EXPECT_TRUE(d.targets.empty());
  EXPECT_EQ(d.not_listed, 2u);  // both zones
  // Listed later in the same period: the others decided without it, so it stays out.
  d = latch.Decide(3, self, pods);
  EXPECT_TRUE(d.targets.empty());
  EXPECT_EQ(d.not_chosen + d.not_listed, 0u);
  // Not listed yet: no list at all decides nothing (discovery has not listed).
  PeriodLatch fresh;
  d = fresh.Decide(3, self, {});
  EXPECT_EQ(d.targets.size() + d.not_chosen + d.not_listed, 0u);
  // The next period it counts like every other Pod.
  std::size_t decided = 0;
  for (std::uint64_t period = 4; period < 40; ++period) {
    d = latch.Decide(period, self, pods);
    EXPECT_EQ(d.targets.size() + d.not_chosen, 2u);
    decided += d.targets.size();
  }
  EXPECT_GT(decided, 0u);  // and is the prober some of the time
}

TEST(CoordinationTest, AZoneAppearingMidPeriodIsDecidedAtFirstSight) {
  auto pods = Pods(3, 2);
  std::vector<topology::Peer> two_zones(pods.begin(), pods.begin() + 4);
  topology::Self self = SelfOf(pods[0]);
  PeriodLatch latch;
  auto d = latch.Decide(9, self, two_zones);
  EXPECT_EQ(d.targets.size() + d.not_chosen, 2u);
  d = latch.Decide(9, self, pods);
  EXPECT_EQ(d.targets.size() + d.not_chosen, 1u);  // zone-c only
}

}  // namespace
}  // namespace podnet::probes::burst
