#include "exporter/probes/burst/budget.h"

#include <gtest/gtest.h>

namespace podnet::probes::burst {
namespace {

TEST(ByteBudgetTest, SlidingHour) {
  using namespace std::chrono_literals;
  ByteBudget b(1000);
  auto t0 = ByteBudget::Clock::time_point{} + 10h;
  EXPECT_EQ(b.Remaining(t0), 1000u);
  b.Charge(t0, 600);
  EXPECT_EQ(b.Remaining(t0 + 1min), 400u);
  b.Charge(t0 + 30min, 500);
  EXPECT_EQ(b.Remaining(t0 + 31min), 0u);  // over: never negative
  EXPECT_EQ(b.Used(t0 + 31min), 1100u);
  EXPECT_EQ(b.Remaining(t0 + 60min), 500u);  // the first charge left the window
  EXPECT_EQ(b.Remaining(t0 + 90min), 1000u);
  // A new limit (a reload) keeps what was charged.
  b.Charge(t0 + 90min, 700);
  b.set_limit(2000);
  EXPECT_EQ(b.Remaining(t0 + 91min), 1300u);
  b.set_limit(500);
  EXPECT_EQ(b.Remaining(t0 + 91min), 0u);
}

}  // namespace
}  // namespace podnet::probes::burst
