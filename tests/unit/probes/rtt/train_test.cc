#include "exporter/probes/rtt/train.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace podnet::probes::rtt {
namespace {

// A script of what happens to one train, and what must come of it. Times are nanoseconds on an
// arbitrary base; RTTs are checked in nanoseconds to avoid float comparisons.
struct Event {
  enum Type { kSent, kTxStamp, kReply, kClose } type;
  int index = 0;
  std::int64_t ns = 0;
  Train::Reply want = Train::Reply::kFirst;  // for kReply
};

Event Sent(int i, std::int64_t ns) { return {Event::kSent, i, ns}; }
Event Stamp(int i, std::int64_t ns) { return {Event::kTxStamp, i, ns}; }
Event Reply(int i, std::int64_t ns, Train::Reply want) { return {Event::kReply, i, ns, want}; }
Event Close() { return {Event::kClose}; }

struct TrainCase {
  std::string name;
  int count;
  std::vector<Event> events;  // a final Close() is added when the script has none
  // The result of the last Close().
  int sent;
  int received;
  int duplicates;
  int reordered;
  int late;
  std::vector<std::int64_t> rtt_ns;
};

void PrintTo(const TrainCase& c, std::ostream* os) { *os << c.name; }

const char* ReplyName(Train::Reply r) {
  switch (r) {
    case Train::Reply::kFirst:
      return "kFirst";
    case Train::Reply::kReordered:
      return "kReordered";
    case Train::Reply::kDuplicate:
      return "kDuplicate";
    case Train::Reply::kLate:
      return "kLate";
    case Train::Reply::kNotSent:
      return "kNotSent";
  }
  return "?";
}

class TrainTest : public ::testing::TestWithParam<TrainCase> {};

TEST_P(TrainTest, Bookkeeping) {
  const auto& c = GetParam();
  Train t(c.count);
  EXPECT_EQ(t.count(), c.count < 0 ? 0 : c.count);
  EXPECT_FALSE(t.closed());
  std::vector<Event> events = c.events;
  if (events.empty() || events.back().type != Event::kClose) events.push_back(Close());
  TrainResult r;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    SCOPED_TRACE("event " + std::to_string(i));
    switch (e.type) {
      case Event::kSent:
        t.OnSent(e.index, e.ns);
        break;
      case Event::kTxStamp:
        t.OnTxTimestamp(e.index, e.ns);
        break;
      case Event::kReply:
        EXPECT_STREQ(ReplyName(t.OnReply(e.index, e.ns)), ReplyName(e.want))
            << "reply to " << e.index;
        break;
      case Event::kClose:
        r = t.Close();
        EXPECT_TRUE(t.closed());
        break;
    }
  }
  EXPECT_EQ(r.sent, c.sent);
  EXPECT_EQ(r.received, c.received);
  EXPECT_EQ(r.duplicates, c.duplicates);
  EXPECT_EQ(r.reordered, c.reordered);
  EXPECT_EQ(r.late, c.late);
  std::vector<std::int64_t> rtt_ns;
  for (double s : r.rtt_seconds) rtt_ns.push_back(static_cast<std::int64_t>(s * 1e9 + 0.5));
  EXPECT_EQ(rtt_ns, c.rtt_ns);
}

using R = Train::Reply;
constexpr std::int64_t kT0 = 1'700'000'000'000'000'000;  // a realistic CLOCK_REALTIME value
constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kSec = 1'000'000'000;

INSTANTIATE_TEST_SUITE_P(
    Table, TrainTest,
    ::testing::Values(
        TrainCase{
            "all_answered",
            3,
            {Sent(0, kT0), Sent(1, kT0 + 10 * kMs), Sent(2, kT0 + 20 * kMs),
             Reply(0, kT0 + 300'000, R::kFirst), Reply(1, kT0 + 10 * kMs + 350'000, R::kFirst),
             Reply(2, kT0 + 20 * kMs + 40'000, R::kFirst)},
            3,
            3,
            0,
            0,
            0,
            {300'000, 350'000, 40'000}},
        TrainCase{"replies_before_later_sends",
                  2,
                  {Sent(0, kT0), Reply(0, kT0 + 500, R::kFirst), Sent(1, kT0 + kMs),
                   Reply(1, kT0 + kMs + 700, R::kFirst)},
                  2,
                  2,
                  0,
                  0,
                  0,
                  {500, 700}},
        TrainCase{
            "loss",
            4,
            {Sent(0, kT0), Sent(1, kT0 + kMs), Sent(2, kT0 + 2 * kMs), Sent(3, kT0 + 3 * kMs),
             Reply(0, kT0 + 100'000, R::kFirst), Reply(2, kT0 + 2 * kMs + 200'000, R::kFirst)},
            4,
            2,
            0,
            0,
            0,
            {100'000, 200'000}},
        TrainCase{"all_lost",
                  3,
                  {Sent(0, kT0), Sent(1, kT0 + kMs), Sent(2, kT0 + 2 * kMs)},
                  3,
                  0,
                  0,
                  0,
                  0,
                  {}},
        TrainCase{"duplicates_keep_first_rtt",
                  2,
                  {Sent(0, kT0), Sent(1, kT0 + kMs), Reply(0, kT0 + 1000, R::kFirst),
                   Reply(0, kT0 + 5000, R::kDuplicate), Reply(1, kT0 + kMs + 2000, R::kFirst),
                   Reply(0, kT0 + 9000, R::kDuplicate), Reply(1, kT0 + kMs + 3000, R::kDuplicate)},
                  2,
                  2,
                  3,
                  0,
                  0,
                  {1000, 2000}},
        TrainCase{"reordering",
                  3,
                  {Sent(0, kT0), Sent(1, kT0 + kMs), Sent(2, kT0 + 2 * kMs),
                   Reply(0, kT0 + 3 * kMs, R::kFirst), Reply(2, kT0 + 3 * kMs + 100, R::kFirst),
                   Reply(1, kT0 + 3 * kMs + 200, R::kReordered)},
                  3,
                  3,
                  0,
                  1,
                  0,
                  {3 * kMs, 2 * kMs + 200, kMs + 100}},
        TrainCase{"reverse_order",
                  3,
                  {Sent(0, kT0), Sent(1, kT0 + kMs), Sent(2, kT0 + 2 * kMs),
                   Reply(2, kT0 + 3 * kMs, R::kFirst), Reply(1, kT0 + 3 * kMs, R::kReordered),
                   Reply(0, kT0 + 3 * kMs, R::kReordered)},
                  3,
                  3,
                  0,
                  2,
                  0,
                  {3 * kMs, 2 * kMs, kMs}},
        TrainCase{"late_after_close",
                  3,
                  {Sent(0, kT0), Sent(1, kT0 + kMs), Sent(2, kT0 + 2 * kMs),
                   Reply(0, kT0 + 100, R::kFirst), Close(), Reply(1, kT0 + 2 * kSec, R::kLate),
                   Reply(1, kT0 + 2 * kSec, R::kDuplicate), Reply(0, kT0 + 2 * kSec, R::kDuplicate),
                   Reply(2, kT0 + 3 * kSec, R::kLate), Close()},
                  // Late replies stay lost: received and the RTTs are those of the first Close.
                  3,
                  1,
                  2,
                  0,
                  2,
                  {100}},
        TrainCase{"not_sent_index",
                  3,
                  {Sent(0, kT0), Reply(1, kT0 + 100, R::kNotSent),
                   Reply(-1, kT0 + 100, R::kNotSent), Reply(3, kT0 + 100, R::kNotSent),
                   Reply(99, kT0 + 100, R::kNotSent), Reply(0, kT0 + 100, R::kFirst)},
                  1,
                  1,
                  0,
                  0,
                  0,
                  {100}},
        TrainCase{"sent_twice_counts_once",
                  2,
                  {Sent(0, kT0), Sent(0, kT0 + 5 * kMs), Sent(5, kT0), Sent(-1, kT0),
                   Reply(0, kT0 + 6 * kMs, R::kFirst)},
                  1,
                  1,
                  0,
                  0,
                  0,
                  {6 * kMs}},
        TrainCase{"kernel_tx_stamp_preferred",
                  2,
                  {Sent(0, kT0), Stamp(0, kT0 + 4000), Sent(1, kT0 + kMs),
                   Reply(0, kT0 + 54'000, R::kFirst), Reply(1, kT0 + kMs + 30'000, R::kFirst)},
                  2,
                  2,
                  0,
                  0,
                  0,
                  {50'000, 30'000}},
        TrainCase{"kernel_tx_stamp_equal_to_user_time",
                  1,
                  {Sent(0, kT0), Stamp(0, kT0), Reply(0, kT0 + 10'000, R::kFirst)},
                  1,
                  1,
                  0,
                  0,
                  0,
                  {10'000}},
        TrainCase{"kernel_tx_stamp_exactly_one_second_later",
                  1,
                  {Sent(0, kT0), Stamp(0, kT0 + kSec), Reply(0, kT0 + kSec + 10'000, R::kFirst)},
                  1,
                  1,
                  0,
                  0,
                  0,
                  {10'000}},
        TrainCase{"kernel_tx_stamp_before_user_time_ignored",
                  1,
                  {Sent(0, kT0), Stamp(0, kT0 - 1), Reply(0, kT0 + 10'000, R::kFirst)},
                  1,
                  1,
                  0,
                  0,
                  0,
                  {10'000}},
        TrainCase{
            "kernel_tx_stamp_more_than_one_second_later_ignored",
            1,
            {Sent(0, kT0), Stamp(0, kT0 + kSec + 1), Reply(0, kT0 + kSec + 10'000, R::kFirst)},
            1,
            1,
            0,
            0,
            0,
            {kSec + 10'000}},
        TrainCase{"kernel_tx_stamp_of_unsent_request_ignored",
                  2,
                  {Stamp(0, kT0 + 10), Sent(0, kT0), Stamp(1, kT0 + 10), Stamp(7, kT0),
                   Reply(0, kT0 + 10'000, R::kFirst)},
                  1,
                  1,
                  0,
                  0,
                  0,
                  {10'000}},
        TrainCase{"implausible_stamp_does_not_replace_plausible_one",
                  1,
                  {Sent(0, kT0), Stamp(0, kT0 + 2000), Stamp(0, kT0 + 5 * kSec),
                   Reply(0, kT0 + 12'000, R::kFirst)},
                  1,
                  1,
                  0,
                  0,
                  0,
                  {10'000}},
        TrainCase{
            "negative_rtt_dropped_but_received",
            3,
            {Sent(0, kT0), Sent(1, kT0 + kMs), Sent(2, kT0 + 2 * kMs),
             Reply(0, kT0 + 1000, R::kFirst),
             // The wall clock stepped back between send and receive.
             Reply(1, kT0 + kMs - 5 * kSec, R::kFirst), Reply(2, kT0 + 2 * kMs + 3000, R::kFirst)},
            3,
            3,
            0,
            0,
            0,
            {1000, 3000}},
        TrainCase{"negative_rtt_against_kernel_stamp_dropped",
                  1,
                  {Sent(0, kT0), Stamp(0, kT0 + 5000), Reply(0, kT0 + 4000, R::kFirst)},
                  1,
                  1,
                  0,
                  0,
                  0,
                  {}},
        TrainCase{"zero_rtt_kept", 1, {Sent(0, kT0), Reply(0, kT0, R::kFirst)}, 1, 1, 0, 0, 0, {0}},
        TrainCase{"empty_train", 0, {Sent(0, kT0), Reply(0, kT0, R::kNotSent)}, 0, 0, 0, 0, 0, {}},
        TrainCase{"negative_count_is_empty", -3, {Sent(0, kT0)}, 0, 0, 0, 0, 0, {}}),
    [](const auto& info) { return info.param.name; });

TEST(TrainTest, CountsRttsTimedFromKernelTxStamps) {
  // train.h: of rtt_seconds, how many were timed from a kernel TX stamp.
  Train t(5);
  for (int i = 0; i < 5; ++i) t.OnSent(i, kT0 + i * kMs);
  t.OnTxTimestamp(0, kT0 + 1000);            // plausible: used
  t.OnTxTimestamp(1, kT0 + kMs - 1);         // before the user time: ignored
  t.OnTxTimestamp(2, kT0 + 2 * kMs + 2000);  // plausible, but the reply predates it: dropped
  t.OnTxTimestamp(3, kT0 + 3 * kMs + 500);   // plausible, but request 3 is lost
  t.OnTxTimestamp(4, kT0 + 4 * kMs + 700);   // plausible: used
  t.OnReply(0, kT0 + 11'000);
  t.OnReply(1, kT0 + kMs + 9'000);
  t.OnReply(2, kT0 + 2 * kMs + 1500);
  t.OnReply(4, kT0 + 4 * kMs + 5'700);
  TrainResult r = t.Close();
  EXPECT_EQ(r.received, 4);
  std::vector<std::int64_t> rtt_ns;
  for (double s : r.rtt_seconds) rtt_ns.push_back(static_cast<std::int64_t>(s * 1e9 + 0.5));
  EXPECT_EQ(rtt_ns, (std::vector<std::int64_t>{10'000, 9'000, 5'000}));
  EXPECT_EQ(r.tx_kernel_stamped, 2);
  // Close is repeatable and does not count twice.
  EXPECT_EQ(t.Close().tx_kernel_stamped, 2);
}

TEST(TrainTest, FirstKernelTxStampWinsOverABridgePortsLaterOne) {
  // A bridged path stamps one packet twice under one OPT_ID key: our veth, then the bridge port
  // 5-14 µs later. The RTT is from the first, or it is one bridge hop short.
  Train t(1);
  t.OnSent(0, kT0);
  t.OnTxTimestamp(0, kT0 + 2'000);   // our interface
  t.OnTxTimestamp(0, kT0 + 12'000);  // the bridge's outgoing port
  t.OnReply(0, kT0 + 40'000);
  TrainResult r = t.Close();
  ASSERT_EQ(r.rtt_seconds.size(), 1u);
  EXPECT_EQ(static_cast<std::int64_t>(r.rtt_seconds[0] * 1e9 + 0.5), 38'000);
}

// Summarize: exact minimum and median of a round's RTTs (what the round gauges export).
struct StatsCase {
  std::string name;
  std::vector<double> rtt_seconds;
  std::optional<RoundStats> want;
};

void PrintTo(const StatsCase& c, std::ostream* os) { *os << c.name; }

class SummarizeTest : public ::testing::TestWithParam<StatsCase> {};

TEST_P(SummarizeTest, ExactMinAndMedian) {
  const auto& c = GetParam();
  std::vector<double> scratch = {9, 9, 9, 9, 9, 9, 9, 9, 9};  // a longer leftover is overwritten
  auto got = Summarize(c.rtt_seconds, scratch);
  ASSERT_EQ(got.has_value(), c.want.has_value());
  if (!got) return;
  // Exact: min and the middle values are input values; an even count's median is their mean.
  EXPECT_EQ(got->min_seconds, c.want->min_seconds);
  EXPECT_EQ(got->median_seconds, c.want->median_seconds);
}

INSTANTIATE_TEST_SUITE_P(
    Table, SummarizeTest,
    ::testing::Values(
        StatsCase{"no_reply", {}, std::nullopt},
        StatsCase{"one_reply", {905e-6}, RoundStats{905e-6, 905e-6}},
        StatsCase{"two_replies_mean_of_both", {900e-6, 1000e-6}, RoundStats{900e-6, 950e-6}},
        StatsCase{"odd_unsorted", {7e-6, 3e-6, 5e-6, 1e-6, 9e-6}, RoundStats{1e-6, 5e-6}},
        StatsCase{"even_unsorted_mean_of_two_middle",
                  {8e-6, 2e-6, 6e-6, 4e-6},
                  RoundStats{2e-6, (4e-6 + 6e-6) / 2}},
        StatsCase{"equal_values", {3e-6, 1e-6, 3e-6, 3e-6}, RoundStats{1e-6, 3e-6}},
        StatsCase{"outlier_moves_min_not_median",
                  {905e-6, 906e-6, 100e-6, 907e-6, 40e-3},
                  RoundStats{100e-6, 906e-6}},
        StatsCase{"zero_rtt", {0.0, 2e-6}, RoundStats{0.0, 1e-6}}),
    [](const auto& info) { return info.param.name; });

TEST(TrainTest, StatsCountOnlyFirstRepliesInTime) {
  // Request 0: 100 µs; 1: 300 µs, and a duplicate of it at 5 µs that must not count; 2: 200 µs;
  // 3: answered after Close (late, lost): its 1 µs must not count either.
  Train t(4);
  for (int i = 0; i < 4; ++i) t.OnSent(i, kT0 + i * kMs);
  EXPECT_EQ(t.OnReply(0, kT0 + 100'000), Train::Reply::kFirst);
  EXPECT_EQ(t.OnReply(1, kT0 + kMs + 300'000), Train::Reply::kFirst);
  EXPECT_EQ(t.OnReply(1, kT0 + kMs + 5'000), Train::Reply::kDuplicate);
  EXPECT_EQ(t.OnReply(2, kT0 + 2 * kMs + 200'000), Train::Reply::kFirst);
  TrainResult r = t.Close();
  EXPECT_EQ(t.OnReply(3, kT0 + 3 * kMs + 1'000), Train::Reply::kLate);
  ASSERT_TRUE(r.stats.has_value());
  EXPECT_DOUBLE_EQ(r.stats->min_seconds, 100e-6);
  EXPECT_DOUBLE_EQ(r.stats->median_seconds, 200e-6);
  ASSERT_TRUE(t.Close().stats.has_value());
  EXPECT_DOUBLE_EQ(t.Close().stats->median_seconds, 200e-6);  // the late reply changed nothing

  // The next round starts without figures; one with no reply in time ends without any.
  t.Reset(2);
  EXPECT_FALSE(t.Close().stats.has_value());
  t.Reset(2);
  t.OnSent(0, kT0);
  t.OnSent(1, kT0 + kMs);
  t.OnReply(1, kT0 + kMs + 42'000);
  r = t.Close();
  ASSERT_TRUE(r.stats.has_value());
  EXPECT_DOUBLE_EQ(r.stats->min_seconds, 42e-6);
  EXPECT_DOUBLE_EQ(r.stats->median_seconds, 42e-6);
}

}  // namespace
}  // namespace podnet::probes::rtt
