// discovery: auto's rule (discovery/kubernetes/auto_source.h): which source a Pod takes its
// peers from, by the ready probe Pods the running source counts.
#include "exporter/discovery/kubernetes/auto_source.h"

#include <gtest/gtest.h>

#include <optional>

namespace podnet::discovery::kubernetes {
namespace {

constexpr auto kWatch = PeerSource::kWatch;
constexpr auto kDns = PeerSource::kDns;

TEST(AutoPeerSourceTest, TheFirstAnswerAndTheWatchTakeDnsFromTheThreshold) {
  struct Case {
    std::optional<PeerSource> decided;
    std::size_t pods;
    PeerSource want;
  } cases[] = {
      {std::nullopt, 0, kWatch},  // NXDOMAIN: a new DaemonSet, no Pod ready yet
      {std::nullopt, 99, kWatch},   {std::nullopt, 100, kDns}, {std::nullopt, 3399, kDns},
      {std::nullopt, 3400, kWatch},  // too near what one DNS message holds
      {kWatch, 99, kWatch},         {kWatch, 100, kDns},       {kWatch, 3399, kDns},
      {kWatch, 3400, kWatch},       {kWatch, 5000, kWatch},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(AutoPeerSource(c.decided, c.pods, 100), c.want)
        << "decided " << (c.decided ? PeerSourceName(*c.decided) : "nothing") << ", " << c.pods
        << " Pods";
  }
}

TEST(AutoPeerSourceTest, DnsKeepsItsPodsDownToThreeQuartersAndUpToTheCeiling) {
  // 100 -> 75: a rollout's dip in ready Pods does not send the Pods back to the watch.
  EXPECT_EQ(AutoPeerSource(kDns, 100, 100), kDns);
  EXPECT_EQ(AutoPeerSource(kDns, 75, 100), kDns);
  EXPECT_EQ(AutoPeerSource(kDns, 74, 100), kWatch);
  EXPECT_EQ(AutoPeerSource(kDns, 0, 100), kWatch);
  // Between the room and the ceiling, a Pod on DNS stays there; from the ceiling the answer
  // may have been cut: the watch.
  EXPECT_EQ(AutoPeerSource(kDns, 3600, 100), kDns);
  EXPECT_EQ(AutoPeerSource(kDns, kDnsAnswerCeiling - 1, 100), kDns);
  EXPECT_EQ(AutoPeerSource(kDns, kDnsAnswerCeiling, 100), kWatch);
  // The smallest threshold still has a band: 4 -> DNS, 3 stays, 2 goes back.
  EXPECT_EQ(AutoPeerSource(std::nullopt, 4, 4), kDns);
  EXPECT_EQ(AutoPeerSource(kDns, 3, 4), kDns);
  EXPECT_EQ(AutoPeerSource(kDns, 2, 4), kWatch);
}

TEST(AutoPeerSourceTest, ACeilingAboveTheRoomLeavesNoSwingAtTheTop) {
  static_assert(kDnsAnswerRoom < kDnsAnswerCeiling);
  // Every count that sends the watch to DNS is one DNS keeps: no count swings back at once.
  for (std::size_t pods = 0; pods < 5000; pods += 7) {
    if (AutoPeerSource(kWatch, pods, 100) == kDns) {
      EXPECT_EQ(AutoPeerSource(kDns, pods, 100), kDns) << pods;
    }
    if (AutoPeerSource(kDns, pods, 100) == kWatch) {
      EXPECT_EQ(AutoPeerSource(kWatch, pods, 100), kWatch) << pods;
    }
  }
}

}  // namespace
}  // namespace podnet::discovery::kubernetes
