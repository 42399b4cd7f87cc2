#include "exporter/responders/connection_slots.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace podnet::responders {
namespace {
// A namespace of this file's own: the sanitizer builds compile test files together
// (PODNET_UNITY), and the other limiters' tests have a kT0 and a Verdict of other types.
namespace slots {

using namespace std::chrono_literals;
using boost::asio::ip::make_address;
using Reason = ConnectionSlots::Reason;
using Time = ConnectionSlots::Time;

const Time kT0{};

SlotLimits Small(int max, int per_source) {
  SlotLimits l;
  l.max_connections = max;
  l.max_connections_per_source = per_source;
  return l;
}

// Admits and adds a connection `id` from `source`; false if refused.
bool Connect(ConnectionSlots& slots, ConnectionSlots::Id id, const char* source, Time at,
             std::optional<ConnectionSlots::Id>* evicted = nullptr) {
  auto a = slots.Admit(make_address(source), at);
  if (!a.admitted) return false;
  if (evicted) *evicted = a.evicted;
  slots.Add(id, make_address(source), at);
  return true;
}

TEST(ConnectionSlotsTest, OneSourceHoldsAtMostItsLimit) {
  ConnectionSlots slots(Small(16, 4));
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(Connect(slots, i, "10.0.0.1", kT0));
  auto a = slots.Admit(make_address("10.0.0.1"), kT0);
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.refused, Reason::kSourceConnectionLimit);
  // The same source through an IPv6 socket (IPv4-mapped) is the same source.
  EXPECT_FALSE(slots.Admit(make_address("::ffff:10.0.0.1"), kT0).admitted);
  EXPECT_TRUE(Connect(slots, 5, "10.0.0.2", kT0));
  slots.Remove(1, kT0);
  EXPECT_TRUE(Connect(slots, 6, "10.0.0.1", kT0));
}

TEST(ConnectionSlotsTest, AFullTableGivesANewcomerTheIdlestSlotOfTheLargestHolder) {
  ConnectionSlots slots(Small(8, 4));
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(Connect(slots, i, "10.0.0.1", kT0));
  for (int i = 5; i <= 7; ++i) ASSERT_TRUE(Connect(slots, i, "10.0.0.2", kT0));
  ASSERT_TRUE(Connect(slots, 8, "10.0.0.3", kT0));
  // 10.0.0.1 holds the most; of its connections, 3 has received nothing since it came.
  for (ConnectionSlots::Id id : {1, 2, 4, 5, 6, 7, 8}) slots.Received(id, 100, kT0 + 1s);
  std::optional<ConnectionSlots::Id> evicted;
  ASSERT_TRUE(Connect(slots, 9, "10.0.0.4", kT0 + 2s, &evicted));
  EXPECT_EQ(evicted, 3u);
  EXPECT_EQ(slots.ConnectionsOf(make_address("10.0.0.1")), 3);
  EXPECT_EQ(slots.connections(), 8);
  // Now 10.0.0.1 and 10.0.0.2 hold 3: a newcomer takes the idler of their connections.
  slots.Received(1, 200, kT0 + 3s);
  slots.Received(2, 200, kT0 + 3s);
  slots.Received(4, 200, kT0 + 3s);
  ASSERT_TRUE(Connect(slots, 10, "10.0.0.5", kT0 + 4s, &evicted));
  EXPECT_EQ(evicted, 5u);
}

TEST(ConnectionSlotsTest, NoSourceEvictsAnotherHoldingNoMoreThanItWould) {
  ConnectionSlots slots(Small(4, 4));
  ASSERT_TRUE(Connect(slots, 1, "10.0.0.1", kT0));
  ASSERT_TRUE(Connect(slots, 2, "10.0.0.1", kT0));
  ASSERT_TRUE(Connect(slots, 3, "10.0.0.2", kT0));
  ASSERT_TRUE(Connect(slots, 4, "10.0.0.2", kT0));
  // 10.0.0.2 asking for a third slot would hold more than 10.0.0.1 holds: refused.
  auto a = slots.Admit(make_address("10.0.0.2"), kT0 + 1s);
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.refused, Reason::kConnectionLimit);
}

TEST(ConnectionSlotsTest, AnEvictedSourceCannotTakeItsSlotBackOverItsFairShare) {
  SlotLimits l = Small(4, 4);
  ConnectionSlots slots(l);
  ASSERT_TRUE(Connect(slots, 1, "10.0.0.1", kT0));
  ASSERT_TRUE(Connect(slots, 2, "10.0.0.1", kT0 + 1s));
  ASSERT_TRUE(Connect(slots, 3, "10.0.0.2", kT0 + 2s));
  ASSERT_TRUE(Connect(slots, 4, "10.0.0.2", kT0 + 3s));
  std::optional<ConnectionSlots::Id> evicted;
  ASSERT_TRUE(Connect(slots, 5, "10.0.0.3", kT0 + 4s, &evicted));
  EXPECT_EQ(evicted, 1u);  // the idlest of the two largest holders
  // 10.0.0.1 (1 left) could swap with 10.0.0.2 (2) by max-min alone, but it is cooling down
  // and 2 slots would be over its fair share (4 slots / 3 sources).
  auto back = slots.Admit(make_address("10.0.0.1"), kT0 + 5s);
  EXPECT_FALSE(back.admitted);
  EXPECT_EQ(back.refused, Reason::kConnectionLimit);
  // After its cooldown, it may, as anyone may: the idlest of 10.0.0.2's.
  EXPECT_FALSE(slots.Admit(make_address("10.0.0.1"), kT0 + 4s + l.cooldown - 1ms).admitted);
  auto later = slots.Admit(make_address("10.0.0.1"), kT0 + 4s + l.cooldown);
  EXPECT_TRUE(later.admitted);
  EXPECT_EQ(later.evicted, 3u);
}

TEST(ConnectionSlotsTest, ABudgetOverdrawnClosesAllOfTheSourceAndRefusesItUntilFull) {
  SlotLimits l = Small(16, 4);
  ConnectionSlots slots(l);
  ASSERT_TRUE(Connect(slots, 1, "10.0.0.1", kT0));
  ASSERT_TRUE(Connect(slots, 2, "10.0.0.1", kT0));
  ASSERT_TRUE(Connect(slots, 3, "10.0.0.2", kT0));
  EXPECT_TRUE(slots.Received(1, 600, kT0).empty());
  EXPECT_TRUE(slots.Received(3, 1000, kT0).empty());  // another source's budget
  // 600 + 500 bytes: 76 over 10.0.0.1's 1,024; both of its connections are to close.
  EXPECT_EQ(slots.Received(2, 500, kT0), (std::vector<ConnectionSlots::Id>{1, 2}));
  EXPECT_EQ(slots.ConnectionsOf(make_address("10.0.0.1")), 0);
  auto a = slots.Admit(make_address("10.0.0.1"), kT0);
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.refused, Reason::kInputBudget);
  // Full again after (1,024 + 76) / 512 bytes a second = 2.15 s.
  EXPECT_FALSE(slots.Admit(make_address("10.0.0.1"), kT0 + 2100ms).admitted);
  EXPECT_TRUE(slots.Admit(make_address("10.0.0.1"), kT0 + 2150ms).admitted);
  EXPECT_TRUE(slots.Received(99, 1'000'000, kT0).empty());  // unknown: ignored
}

TEST(ConnectionSlotsTest, ResetStreamsSpendTheBudgetAnsweredCallsDoNot) {
  ConnectionSlots slots(SlotLimits{});
  // A prober: 400 bytes to set its connection up, then a call (~65 bytes) every 10 ms for
  // 10 s, each answered: far more than the budget in all, never cut.
  ASSERT_TRUE(Connect(slots, 1, "10.0.0.1", kT0));
  std::uint64_t bytes = 400;
  ASSERT_TRUE(slots.Received(1, bytes, kT0).empty());
  for (int i = 1; i <= 1000; ++i) {
    bytes += 65;
    ASSERT_TRUE(slots.Received(1, bytes, kT0 + i * 10ms).empty()) << i;
    slots.Answered(1, kT0 + i * 10ms + 1ms);
  }
  // A rapid reset: HEADERS + RST_STREAM, 28 bytes a stream, nothing answered. Cut within the
  // burst (1,024 bytes: 36 streams) plus what 1 ms of refill adds.
  ASSERT_TRUE(Connect(slots, 2, "10.0.0.2", kT0));
  bytes = 33;  // preface and SETTINGS
  int streams = 0;
  while (slots.Received(2, bytes += 28, kT0 + streams * 1us).empty()) ++streams;
  EXPECT_EQ(streams, 35);
}

TEST(ConnectionSlotsTest, AnAnswerCreditedBeforeItsRequestIsChargedIsNotLost) {
  // The guard reads the kernel's byte count on its own thread, gRPC answers on its own: the
  // answers of 8 calls of 150 bytes may be credited before their bytes are charged, at once.
  ConnectionSlots slots(SlotLimits{});
  ASSERT_TRUE(Connect(slots, 1, "10.0.0.1", kT0));
  std::uint64_t bytes = 33;  // preface and SETTINGS
  ASSERT_TRUE(slots.Received(1, bytes, kT0).empty());
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 8; ++i) slots.Answered(1, kT0);
    bytes += 8 * 150;
    ASSERT_TRUE(slots.Received(1, bytes, kT0).empty()) << "cut in round " << round;
  }
  // The headroom is bounded: answers alone never buy more than it.
  for (int i = 0; i < 1000; ++i) slots.Answered(1, kT0);
  int streams = 0;
  while (slots.Received(1, bytes += 28, kT0).empty()) ++streams;
  EXPECT_LE(streams, (1024 + 2048) / 28);
}

TEST(ConnectionSlotsTest, AConnectionThatReceivesNothingTimesOut) {
  SlotLimits l = Small(16, 4);
  ConnectionSlots slots(l);
  ASSERT_TRUE(Connect(slots, 1, "10.0.0.1", kT0));
  ASSERT_TRUE(Connect(slots, 2, "10.0.0.2", kT0));
  slots.Received(2, 100, kT0 + 1min);
  EXPECT_TRUE(slots.Idle(kT0 + l.idle_timeout - 1ms).empty());
  EXPECT_EQ(slots.Idle(kT0 + l.idle_timeout), (std::vector<ConnectionSlots::Id>{1}));
  EXPECT_EQ(slots.Idle(kT0 + 1min + l.idle_timeout), (std::vector<ConnectionSlots::Id>{2}));
  EXPECT_EQ(slots.connections(), 0);
}

TEST(ConnectionSlotsTest, SourceRecordsAreBounded) {
  SlotLimits l = Small(4, 4);
  l.max_sources = 64;
  ConnectionSlots slots(l);
  for (int i = 0; i < 1000; ++i) {
    std::string source = "10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250);
    ASSERT_TRUE(Connect(slots, i + 1, source.c_str(), kT0 + i * 1ms));
    slots.Received(i + 1, 5000, kT0 + i * 1ms);  // over budget: closed, remembered
  }
  EXPECT_LE(slots.sources(), 64u);
  EXPECT_EQ(slots.connections(), 0);
}

// An hour, second by second: a prober keeps one connection and makes a round of 10 answered
// calls every 10 s, while 32 other sources each hold 8 connections and open a new one each
// second whenever they hold fewer (evicted, timed out): the slots are always full. The prober
// never loses its connection nor is refused: 32 sources deny it nothing.
TEST(ConnectionSlotsTest, ThirtyTwoSourcesHoldingEverySlotDenyAProberNothing) {
  for (bool chatty : {false, true}) {  // attackers silent (they time out), or sending each second
    ConnectionSlots slots(SlotLimits{});
    ConnectionSlots::Id next = 1;
    std::map<ConnectionSlots::Id, int> owner;  // attacker index
    std::vector<std::set<ConnectionSlots::Id>> held(32);
    std::map<ConnectionSlots::Id, std::uint64_t> sent;
    std::optional<ConnectionSlots::Id> prober;
    int refused = 0, lost = 0, rounds = 0, evictions = 0;
    auto gone = [&](ConnectionSlots::Id id) {
      if (prober && id == *prober) {
        prober.reset();
        ++lost;
      } else {
        held[owner.at(id)].erase(id);
      }
    };
    for (int s = 0; s < 3600; ++s) {
      const Time now = kT0 + std::chrono::seconds(s);
      for (ConnectionSlots::Id id : slots.Idle(now)) gone(id);
      for (int a = 0; a < 32; ++a) {
        std::string source = "10.2.0." + std::to_string(a + 1);
        while (held[a].size() < 8) {
          auto admission = slots.Admit(make_address(source), now);
          if (!admission.admitted) break;
          if (admission.evicted) gone(*admission.evicted), ++evictions;
          slots.Add(next, make_address(source), now);
          owner[next] = a;
          held[a].insert(next++);
        }
        if (chatty) {
          for (ConnectionSlots::Id id : held[a]) {
            ASSERT_TRUE(slots.Received(id, sent[id] += 20, now).empty());
          }
        }
      }
      if (s % 10 != 0) continue;
      ++rounds;
      if (!prober) {
        auto admission = slots.Admit(make_address("10.3.0.1"), now);
        if (!admission.admitted) {
          ++refused;
          continue;
        }
        if (admission.evicted) gone(*admission.evicted), ++evictions;
        slots.Add(next, make_address("10.3.0.1"), now);
        prober = next++;
      }
      for (int c = 0; c < 10; ++c) {
        ASSERT_TRUE(slots.Received(*prober, sent[*prober] += 65, now).empty());
        slots.Answered(*prober, now);
      }
    }
    EXPECT_EQ(rounds, 360);
    EXPECT_EQ(refused, 0) << "chatty " << chatty;
    EXPECT_EQ(lost, 0) << "chatty " << chatty;
    EXPECT_GE(evictions, 1) << "chatty " << chatty;  // the prober's slot was taken from one
    EXPECT_EQ(slots.connections(), 256) << "chatty " << chatty;
  }
}

}  // namespace slots
}  // namespace
}  // namespace podnet::responders
