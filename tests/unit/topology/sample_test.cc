// The per-zone samples of the DNS lookups (issue 40): min(count, zone size) Pods of each zone
// per period, drawn again each period, agreed on by every Pod from the same list. Deterministic
// hashes: every bound below is checked exactly, not within a probability.

#include "exporter/topology/sample.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace podnet::topology {
namespace {

using namespace std::chrono_literals;

// `per_zone[z]` Pods in zone "zone-<a+z>" (the last zone "" when `unknown_last`), one per node,
// each named after its node as discovery names probe Pods.
std::vector<Peer> ZonePods(const std::vector<int>& per_zone, bool unknown_last = false) {
  std::vector<Peer> pods;
  int n = 0;
  for (std::size_t z = 0; z < per_zone.size(); ++z) {
    for (int i = 0; i < per_zone[z]; ++i, ++n) {
      Peer p;
      p.node = "node-" + std::to_string(n * 7919 % 100000);
      p.name = p.node;
      p.pod = "podnet-" + std::to_string(n);
      bool unknown = unknown_last && z + 1 == per_zone.size();
      p.zone = unknown ? "" : "zone-" + std::string(1, static_cast<char>('a' + z));
      pods.push_back(p);
    }
  }
  return pods;
}

Self SelfOfPod(const Peer& p) { return {p.pod, p.node, p.zone}; }

// The Pods that take the duty, by zone, each deciding from `list`.
std::map<std::string, std::set<std::string>> SampleOf(std::uint64_t period,
                                                      const std::vector<Peer>& pods,
                                                      const std::vector<Peer>& list,
                                                      std::size_t count,
                                                      std::string_view secret = "uid") {
  std::map<std::string, std::set<std::string>> out;
  for (const Peer& p : pods) {
    if (InZoneSample("dns lookups", period, SelfOfPod(p), list, count, secret)) {
      out[p.zone].insert(p.name);
    }
  }
  return out;
}

TEST(ZoneSampleTest, PeriodNumberIsUnixTimeOverPeriod) {
  std::chrono::system_clock::time_point t{6h * 5 + 100s};
  EXPECT_EQ(PeriodNumber(t, 6h), 5u);
  EXPECT_EQ(PeriodNumber(t - 101s, 6h), 4u);
  EXPECT_EQ(PeriodNumber(std::chrono::system_clock::time_point{}, 1h), 0u);
  EXPECT_EQ(PeriodNumber(t, 0s), 0u);
}

TEST(ZoneSampleTest, EachZoneHasMinOfCountAndItsPodsEveryPeriod) {
  const auto pods = ZonePods({10, 3, 1, 5}, /*unknown_last=*/true);
  for (std::size_t count : {1u, 2u, 4u}) {
    for (std::uint64_t period = 0; period < 200; ++period) {
      auto sample = SampleOf(period, pods, pods, count);
      EXPECT_EQ(sample["zone-a"].size(), std::min<std::size_t>(count, 10)) << period;
      EXPECT_EQ(sample["zone-b"].size(), std::min<std::size_t>(count, 3)) << period;
      EXPECT_EQ(sample["zone-c"].size(), 1u) << period;
      EXPECT_EQ(sample[""].size(), std::min<std::size_t>(count, 5)) << period;
    }
  }
}

TEST(ZoneSampleTest, TheDutyRotatesOverEveryPodOfAZone) {
  const auto pods = ZonePods({10});
  std::map<std::string, int> periods_in;
  std::set<std::set<std::string>> distinct;
  for (std::uint64_t period = 0; period < 600; ++period) {
    auto sample = SampleOf(period, pods, pods, 2)["zone-a"];
    distinct.insert(sample);
    for (const auto& name : sample) ++periods_in[name];
  }
  // Fair share: 2 of 10 in 600 periods = 120 each.
  ASSERT_EQ(periods_in.size(), 10u);
  for (const auto& [name, n] : periods_in) {
    EXPECT_GT(n, 80) << name;
    EXPECT_LT(n, 160) << name;
  }
  EXPECT_GT(distinct.size(), 30u);  // of the 45 pairs
}

TEST(ZoneSampleTest, APodOutsideItsOwnListIsNeverSampledAndTheOthersFillIn) {
  const auto pods = ZonePods({6});
  for (std::uint64_t period = 0; period < 100; ++period) {
    auto first = SampleOf(period, pods, pods, 2)["zone-a"];
    // The first sampled Pod leaves the list (not ready, or leaving): it stops at once, and every
    // Pod still listed agrees on a full sample without it.
    std::vector<Peer> without;
    for (const Peer& p : pods) {
      if (p.name != *first.begin()) without.push_back(p);
    }
    auto after = SampleOf(period, pods, without, 2)["zone-a"];
    EXPECT_EQ(after.size(), 2u) << period;
    EXPECT_EQ(after.count(*first.begin()), 0u) << period;
    EXPECT_EQ(after.count(*first.rbegin()), 1u) << period;  // the other one stays
  }
}

TEST(ZoneSampleTest, SelfIsPlacedByItsOwnRecordNotItsUnreadZone) {
  const auto pods = ZonePods({4, 4});
  for (std::uint64_t period = 0; period < 50; ++period) {
    for (const Peer& p : pods) {
      Self unread = SelfOfPod(p);
      unread.zone.clear();  // the Node's zone not read yet
      EXPECT_EQ(InZoneSample("dns lookups", period, unread, pods, 1, "uid"),
                InZoneSample("dns lookups", period, SelfOfPod(p), pods, 1, "uid"))
          << p.name << " " << period;
    }
  }
}

TEST(ZoneSampleTest, TheSecretAndTheDutyEachDrawTheirOwnSample) {
  const auto pods = ZonePods({20});
  int differ_secret = 0, differ_duty = 0;
  for (std::uint64_t period = 0; period < 100; ++period) {
    auto keyed = SampleOf(period, pods, pods, 1, "uid-1")["zone-a"];
    differ_secret += keyed != SampleOf(period, pods, pods, 1, "uid-2")["zone-a"];
    std::set<std::string> other_duty;
    for (const Peer& p : pods) {
      if (InZoneSample("other", period, SelfOfPod(p), pods, 1, "uid-1")) other_duty.insert(p.name);
    }
    differ_duty += keyed != other_duty;
  }
  // One of 20 each: the same Pod by chance in ~5 % of periods.
  EXPECT_GT(differ_secret, 85);
  EXPECT_GT(differ_duty, 85);
}

TEST(ZoneSampleTest, ACountOfZeroSamplesNobody) {
  const auto pods = ZonePods({3});
  EXPECT_TRUE(SampleOf(7, pods, pods, 0).empty());
  EXPECT_TRUE(SampleOf(7, pods, {}, 2).empty());
}

}  // namespace
}  // namespace podnet::topology
