#include "exporter/responders/echo_limiter.h"

#include <gtest/gtest.h>

namespace podnet::responders {
namespace {

using namespace std::chrono_literals;
using Verdict = EchoLimiter::Verdict;
using boost::asio::ip::make_address;

const EchoLimiter::Clock::time_point kT0{};

EchoLimits Limits() {
  EchoLimits l;
  l.replies_per_second = 1600;
  l.bytes_per_second = 1.6e6;
  l.source_share = 1.0 / 16;  // 100 replies and 100 kB per source and second
  return l;
}

int Answered(EchoLimiter& l, const char* source, int n, std::size_t bytes,
             EchoLimiter::Clock::time_point at) {
  int answered = 0;
  for (int i = 0; i < n; ++i)
    answered += l.Admit(make_address(source), bytes, at) == Verdict::kAnswer;
  return answered;
}

TEST(EchoLimiterTest, OneSourceGetsItsShareOthersAreUntouched) {
  EchoLimiter l(Limits(), kT0);
  EXPECT_EQ(Answered(l, "10.0.0.1", 1000, 56, kT0), 100);
  EXPECT_EQ(l.Admit(make_address("10.0.0.1"), 56, kT0), Verdict::kSourceLimited);
  // Another prober at the same instant: all of its requests answered.
  EXPECT_EQ(Answered(l, "10.0.0.2", 20, 56, kT0), 20);
  // The share refills at its rate: 10 ms later, one more reply for the flooder.
  EXPECT_EQ(Answered(l, "10.0.0.1", 5, 56, kT0 + 10ms), 1);
}

TEST(EchoLimiterTest, BytesAreBudgetedPerSource) {
  EchoLimiter l(Limits(), kT0);
  // 100 kB per source and second: eleven 9000-byte replies, not a hundred.
  EXPECT_EQ(Answered(l, "10.0.0.1", 100, 9000, kT0), 11);
  EXPECT_EQ(l.Admit(make_address("10.0.0.1"), 56, kT0), Verdict::kAnswer);
}

TEST(EchoLimiterTest, TooLargeIsNeverAnswered) {
  EchoLimiter l(Limits(), kT0);
  EXPECT_EQ(l.Admit(make_address("10.0.0.1"), 65507, kT0), Verdict::kTooLarge);
  EXPECT_EQ(l.Admit(make_address("10.0.0.1"), 9001, kT0), Verdict::kTooLarge);
  EXPECT_EQ(l.Admit(make_address("10.0.0.1"), 9000, kT0), Verdict::kAnswer);
}

TEST(EchoLimiterTest, ManySourcesShareTheOverallBudget) {
  EchoLimiter l(Limits(), kT0);
  int answered = 0;
  for (int s = 0; s < 40; ++s) {
    answered += Answered(l, ("10.0.1." + std::to_string(s)).c_str(), 100, 56, kT0);
  }
  EXPECT_EQ(answered, 1600);
  EXPECT_EQ(l.Admit(make_address("10.0.2.1"), 56, kT0), Verdict::kRateLimited);
}

TEST(EchoLimiterTest, AQuietProberIsAnsweredWhileManySourcesFlood) {
  // 32 sources (twice what it takes to use up the overall rate) each send 10× their share for
  // 10 s; a prober sends a train of 20 requests a second. Every one of its requests is
  // answered: the flooders stop at the reserve (a quarter second's worth), which refills for
  // quiet sources first.
  EchoLimiter l(Limits(), kT0);
  int flood_answered = 0, prober_answered = 0, prober_sent = 0;
  for (int ms = 0; ms < 10000; ms += 10) {
    auto at = kT0 + std::chrono::milliseconds(ms);
    for (int s = 0; s < 32; ++s) {
      flood_answered += Answered(l, ("10.0.5." + std::to_string(s)).c_str(), 10, 56, at);
    }
    if (ms % 50 == 0) {
      ++prober_sent;
      prober_answered += Answered(l, "10.0.6.1", 1, 1000, at);
    }
  }
  EXPECT_EQ(prober_answered, prober_sent);
  EXPECT_LE(flood_answered, 1600 * 11);  // the overall budget holds: a second's burst + 10 s
  EXPECT_GE(flood_answered, 1600 * 9);   // and is used
  // A flooder's requests over its share are refused as that, not as the overall budget's.
  Answered(l, "10.0.5.1", 200, 56, kT0 + 10s);
  EXPECT_EQ(l.Admit(make_address("10.0.5.1"), 56, kT0 + 10s), Verdict::kSourceLimited);
}

TEST(EchoLimiterTest, Ipv4MappedIsTheSameSource) {
  EchoLimiter l(Limits(), kT0);
  EXPECT_EQ(Answered(l, "10.0.0.1", 100, 56, kT0), 100);
  EXPECT_EQ(l.Admit(make_address("::ffff:10.0.0.1"), 56, kT0), Verdict::kSourceLimited);
}

TEST(EchoLimiterTest, SourceTableIsBounded) {
  EchoLimits limits = Limits();
  limits.max_sources = 8;
  limits.replies_per_second = 1e6;
  EchoLimiter l(limits, kT0);
  for (int s = 0; s < 100; ++s) {
    l.Admit(make_address("10.0.3." + std::to_string(s)), 56, kT0);
    EXPECT_LE(l.sources(), 8u);
  }
  // A second later the idle ones are forgotten and a new source gets a place again.
  l.Admit(make_address("10.0.4.1"), 56, kT0 + 1s);
  EXPECT_EQ(l.sources(), 1u);
}

}  // namespace
}  // namespace podnet::responders
