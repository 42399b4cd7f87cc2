#include "exporter/probes/mtu/search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace podnet::probes::mtu {
namespace {

// A path for the search: what becomes of a datagram of each size. `mtu`: the largest that
// crosses; above it, `icmp` says whether an error names it (else the datagram is lost silently).
// `drop_once`: sizes whose first datagram is lost whatever their size (a dropped packet).
struct Path {
  int mtu;
  bool icmp = false;
  std::vector<int> drop_once = {};
  int named = 0;  // the MTU the error names, when not `mtu` (a router naming less than it carries)
};

struct Outcome {
  int largest;
  int named;
  bool black_hole;
  bool exact;
  int datagrams;
  std::vector<int> sizes;  // in the order sent
};

Outcome Walk(const Path& path, int hint = 0, int min = 1280, int max = 9001, int budget = 24,
             int floor = 0) {
  Search s(min, max, budget, hint, floor);
  std::vector<int> drops = path.drop_once;
  Outcome o{};
  for (int guard = 0; guard < 100; ++guard) {
    auto next = s.Next();
    if (!next) break;
    int size = *next;
    s.Sent();
    o.sizes.push_back(size);
    if (auto it = std::find(drops.begin(), drops.end(), size); it != drops.end()) {
      drops.erase(it);
      s.Lost(size);
    } else if (size <= path.mtu) {
      s.Answered(size);
    } else if (path.icmp) {
      s.TooBig(size, path.named != 0 ? path.named : path.mtu);
    } else {
      s.Lost(size);
    }
  }
  o.largest = s.largest();
  o.named = s.named_mtu();
  o.black_hole = s.black_hole();
  o.exact = s.exact();
  o.datagrams = s.datagrams();
  return o;
}

TEST(MtuSearchTest, AHealthyPathIsOneDatagramAtTheUpperBound) {
  Outcome o = Walk({9001});
  EXPECT_EQ(o.sizes, std::vector<int>{9001});
  EXPECT_EQ(o.largest, 9001);
  EXPECT_TRUE(o.exact);
  EXPECT_FALSE(o.black_hole);
}

TEST(MtuSearchTest, AnIcmpErrorNamesTheMtuAndTheNextDatagramConfirmsIt) {
  for (int mtu : {1500, 1450, 8500}) {
    SCOPED_TRACE(mtu);
    Outcome o = Walk({mtu, /*icmp=*/true});
    EXPECT_EQ(o.sizes, (std::vector<int>{9001, mtu}));
    EXPECT_EQ(o.largest, mtu);
    EXPECT_EQ(o.named, mtu);
    EXPECT_TRUE(o.exact);
    EXPECT_FALSE(o.black_hole) << "the error was delivered";
  }
}

TEST(MtuSearchTest, ABlackHoleIsFoundToTheByteWithinTheBudget) {
  for (int mtu : {1500, 1450, 1280, 8500, 9000}) {
    SCOPED_TRACE(mtu);
    Outcome o = Walk({mtu});
    EXPECT_EQ(o.largest, mtu);
    EXPECT_TRUE(o.exact);
    EXPECT_TRUE(o.black_hole);
    EXPECT_EQ(o.named, 0);
    EXPECT_LE(o.datagrams, 18) << "9001 twice, 1280, ~13 bisection steps, the boundary again";
  }
}

TEST(MtuSearchTest, TheLastRoundsAnswerConfirmsAnUnchangedBlackHoleInFiveDatagrams) {
  Outcome o = Walk({1450}, /*hint=*/1450);
  // 9001 twice, 1450, 1451 twice.
  EXPECT_EQ(o.sizes, (std::vector<int>{9001, 9001, 1450, 1451, 1451}));
  EXPECT_EQ(o.largest, 1450);
  EXPECT_TRUE(o.black_hole);
  // A changed path: the hint is a first guess, not an answer.
  Outcome changed = Walk({1500}, /*hint=*/1450);
  EXPECT_EQ(changed.largest, 1500);
  EXPECT_TRUE(changed.exact);
}

TEST(MtuSearchTest, OneDroppedDatagramIsNeitherASmallerMtuNorABlackHole) {
  Outcome o = Walk({9001, false, {9001}});
  EXPECT_EQ(o.sizes, (std::vector<int>{9001, 9001}));
  EXPECT_EQ(o.largest, 9001);
  EXPECT_FALSE(o.black_hole);
}

TEST(MtuSearchTest, NothingCrossingEndsAfterTheSmallestSizeWasLostTwice) {
  Outcome o = Walk({0});
  EXPECT_EQ(o.sizes, (std::vector<int>{9001, 9001, 1280, 1280}));
  EXPECT_EQ(o.largest, 0);
  EXPECT_FALSE(o.black_hole) << "nothing smaller crossed: unreachable, not a black hole";
}

// Issue 44, kind 6: overlays sit at 1,100-1,200 bytes (projectcalico/calico#7146). Below
// min_size the search goes on down to the protocol's floor (IPv4 68), with the ICMP error's MTU
// or without it.
TEST(MtuSearchTest, APathBelowMinSizeIsSearchedDownToTheFloor) {
  for (int mtu : {1200, 1100, 576, 68}) {
    SCOPED_TRACE(mtu);
    Outcome named = Walk({mtu, /*icmp=*/true}, 0, 1280, 9001, 24, /*floor=*/68);
    EXPECT_EQ(named.sizes, (std::vector<int>{9001, mtu})) << "the MTU named is tried";
    EXPECT_EQ(named.largest, mtu);
    EXPECT_TRUE(named.exact);
    EXPECT_FALSE(named.black_hole);
    Outcome silent = Walk({mtu}, 0, 1280, 9001, 24, /*floor=*/68);
    EXPECT_EQ(silent.largest, mtu);
    EXPECT_TRUE(silent.exact);
    EXPECT_TRUE(silent.black_hole) << "larger sizes vanished with no error";
    EXPECT_LE(silent.datagrams, 18) << "9001, 1280 and the boundary twice, 68, ~11 steps";
    Outcome next = Walk({mtu}, /*hint=*/mtu, 1280, 9001, 24, /*floor=*/68);
    EXPECT_EQ(next.largest, mtu);
    EXPECT_LE(next.datagrams, 5) << "the last round's answer, below min_size too";
  }
  // Nothing at all: the floor, too, lost twice.
  Outcome none = Walk({0}, 0, 1280, 9001, 24, /*floor=*/68);
  EXPECT_EQ(none.sizes, (std::vector<int>{9001, 9001, 1280, 1280, 68, 68}));
  EXPECT_EQ(none.largest, 0);
  EXPECT_FALSE(none.black_hole);
}

// A named MTU below the floor is tried at the floor, as the kernel takes it (IPv6: a
// packet-too-big below 1280 counts as 1280, net/ipv6/route.c); what was named is kept.
TEST(MtuSearchTest, AnMtuNamedBelowTheFloorIsTriedAtTheFloor) {
  Outcome v6 = Walk({1280, /*icmp=*/true, {}, /*named=*/1000}, 0, 1280, 9001, 24, 1280);
  EXPECT_EQ(v6.sizes, (std::vector<int>{9001, 1280}));
  EXPECT_EQ(v6.largest, 1280);
  EXPECT_EQ(v6.named, 1000);
  EXPECT_TRUE(v6.exact);
  Outcome narrow = Walk({1000, /*icmp=*/true}, 0, 1280, 9001, 24, 1280);
  EXPECT_EQ(narrow.sizes, (std::vector<int>{9001, 1280})) << "1280 refused too: nothing crosses";
  EXPECT_EQ(narrow.largest, 0);
  EXPECT_FALSE(narrow.black_hole) << "said so by an error";
  Outcome v4 = Walk({1200, /*icmp=*/true, {}, /*named=*/20}, 0, 1280, 9001, 24, 68);
  EXPECT_EQ(v4.sizes.at(1), 68) << "RFC 791: no MTU below 68";
  EXPECT_EQ(v4.largest, 68) << "every size above the one named was refused";
}

TEST(MtuSearchTest, TheBudgetBoundsTheDatagramsAndTheAnswerIsALowerBound) {
  Outcome o = Walk({1450}, 0, 1280, 9001, /*budget=*/6);
  EXPECT_EQ(o.datagrams, 6);
  EXPECT_LE(o.largest, 1450);
  EXPECT_GE(o.largest, 1280);
  EXPECT_FALSE(o.exact);
  EXPECT_TRUE(o.black_hole);
}

TEST(MtuSearchTest, AnErrorWithoutAnMtuStillIsNoBlackHole) {
  // The responder's kernel refusing the reply it sends back (EMSGSIZE): too big, but said so.
  Search s(1280, 9001, 24);
  while (auto next = s.Next()) {
    s.Sent();
    if (*next <= 1500) {
      s.Answered(*next);
    } else {
      s.TooBig(*next, 0);
    }
  }
  EXPECT_EQ(s.largest(), 1500);
  EXPECT_TRUE(s.exact());
  EXPECT_FALSE(s.black_hole());
}

}  // namespace
}  // namespace podnet::probes::mtu
