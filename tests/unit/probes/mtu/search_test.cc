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
};

struct Outcome {
  int largest;
  int named;
  bool black_hole;
  bool exact;
  int datagrams;
  std::vector<int> sizes;  // in the order sent
};

Outcome Walk(const Path& path, int hint = 0, int min = 1280, int max = 9001, int budget = 24) {
  Search s(min, max, budget, hint);
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
      s.TooBig(size, path.mtu);
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
