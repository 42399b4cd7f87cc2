// The scheduler on a clock the test moves (testing::ManualClock): random phase on the 20 ms
// grid, fixed rate, skip instead of overlap, and kinds whose targets are not peers. Every
// expectation is exact; nothing waits for real time.
#include "exporter/scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "exporter/metrics/metrics.h"
#include "exporter/scheduler/scheduler_impl.h"
#include "tests/unit/testing/manual_clock.h"

namespace podnet::scheduler {
namespace {

using namespace std::chrono_literals;
using podnet::testing::ManualClock;
using podnet::testing::ManualTimer;
using podnet::testing::VirtualTime;
using TestScheduler = BasicScheduler<ManualClock>;
using TimePoint = std::chrono::steady_clock::time_point;

// What the probes saw: per key, each round's `scheduled` and the clock when Run was called.
struct Log {
  struct Round {
    TimePoint scheduled;
    TimePoint started;
  };
  std::map<std::string, std::vector<Round>> runs;
  std::map<std::string, int> removed;
  std::map<std::string, int> cancelled;
  int for_peer = 0;
  int overlaps = 0;  // a Run while the same probe's round was still running
};

// A round that takes `duration` of the clock (0: done at once), held on a ManualTimer.
class ClockedProbe : public probes::PeerProbe, public std::enable_shared_from_this<ClockedProbe> {
 public:
  ClockedProbe(boost::asio::io_context& io, Log& log, std::string key, ManualClock::duration d)
      : timer_(io), log_(log), key_(std::move(key)), duration_(d) {}
  void Run(TimePoint scheduled, std::function<void()> done) override {
    if (running_) ++log_.overlaps;
    running_ = true;
    log_.runs[key_].push_back({scheduled, ManualClock::now()});
    if (duration_ == ManualClock::duration::zero()) {
      running_ = false;
      done();
      return;
    }
    timer_.expires_after(duration_);
    timer_.async_wait(
        [self = shared_from_this(), done = std::move(done)](boost::system::error_code) {
          self->running_ = false;
          done();  // also when cancelled: done exactly once
        });
  }
  void Cancel() override {
    ++log_.cancelled[key_];
    timer_.cancel();
  }
  void RemoveSeries() override { ++log_.removed[key_]; }

 private:
  ManualTimer timer_;
  Log& log_;
  std::string key_;
  ManualClock::duration duration_;
  bool running_ = false;
};

class ClockedKind : public probes::ProbeKind {
 public:
  ClockedKind(boost::asio::io_context& io, Log& log, config::Duration interval,
              ManualClock::duration round, std::vector<std::string> targets = {})
      : io_(io), log_(log), interval_(interval), round_(round), targets_(std::move(targets)) {}
  std::string_view name() const override { return "clocked"; }
  config::Duration interval() const override { return interval_; }
  std::shared_ptr<probes::PeerProbe> ForPeer(const topology::Peer& p) override {
    ++log_.for_peer;
    return std::make_shared<ClockedProbe>(io_, log_, "peer:" + p.name, round_);
  }
  std::vector<std::string> Targets() const override { return targets_; }
  std::shared_ptr<probes::PeerProbe> ForTarget(const std::string& key) override {
    return std::make_shared<ClockedProbe>(io_, log_, key, round_);
  }

 private:
  boost::asio::io_context& io_;
  Log& log_;
  config::Duration interval_;
  ManualClock::duration round_;
  std::vector<std::string> targets_;
};

std::vector<topology::Peer> Peers(int n, const std::string& prefix = "p") {
  std::vector<topology::Peer> peers(n);
  for (int i = 0; i < n; ++i) peers[i].name = prefix + std::to_string(i);
  return peers;
}

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() : time_(io_), metrics_(registry_) {
    epoch_ = VirtualTime::now();
    sched_ = std::make_unique<TestScheduler>(io_, &metrics_);
  }
  ~SchedulerTest() override {
    sched_.reset();
    time_.Settle();  // the cancelled waits complete
  }

  // Where `t` lies from the scheduler's epoch (its construction), in grid slots; ADD_FAILURE
  // when it is not on the grid.
  std::int64_t Slot(TimePoint t) {
    auto since = t - epoch_;
    EXPECT_EQ(since % kPhaseGrid, ManualClock::duration::zero()) << "off the 20 ms grid";
    return since / kPhaseGrid;
  }
  double Skipped(const std::string& kind) {
    return podnet::testing::CounterValue(registry_, "podnet_probe_rounds_skipped_total",
                                         {{"probe", kind}});
  }
  // The start-delay histogram of `kind` holds `count` samples summing to `sum` seconds.
  void ExpectStartDelays(const std::string& kind, std::uint64_t count, double sum) {
    auto delay = podnet::testing::FindSeries(registry_, "podnet_probe_round_start_delay_seconds",
                                             {{"probe", kind}});
    ASSERT_TRUE(delay);
    EXPECT_EQ(delay->histogram.sample_count, count);
    EXPECT_DOUBLE_EQ(delay->histogram.sample_sum, sum);
  }
  // `rounds` were due `step` apart and each started when due.
  static void ExpectEvery(const std::vector<Log::Round>& rounds, ManualClock::duration step,
                          const std::string& key) {
    for (std::size_t i = 1; i < rounds.size(); ++i) {
      EXPECT_EQ(rounds[i].scheduled - rounds[i - 1].scheduled, step) << key << " round " << i;
      EXPECT_EQ(rounds[i].started, rounds[i].scheduled) << key << " round " << i;
    }
  }

  boost::asio::io_context io_;
  VirtualTime time_;
  prometheus::Registry registry_;
  SchedulerMetrics metrics_;
  TimePoint epoch_;
  std::unique_ptr<TestScheduler> sched_;
  Log log_;
};

TEST_F(SchedulerTest, FirstRoundsAreSpreadOverTheIntervalOnTheGrid) {
  // 200 peers at 1 s: each starts in a random 20 ms slot of (now, now + 1 s], so the 50 slots
  // are all but certainly almost all used (expected 49.1 distinct; fewer than 35 has a
  // probability below 1e-9), while every start is a grid point: at most 50 wake-ups a second.
  time_.Advance(7ms);  // the peers come off the grid; their rounds are still on it
  auto added = VirtualTime::now();
  sched_->SetKind("rtt", std::make_shared<ClockedKind>(io_, log_, 1s, 0ms), Peers(200));
  EXPECT_EQ(sched_->size(), 200u);
  time_.Settle();
  EXPECT_TRUE(log_.runs.empty()) << "a first round ran at once instead of at its phase";
  time_.Advance(1s);
  ASSERT_EQ(log_.runs.size(), 200u);
  std::set<std::int64_t> slots;
  for (const auto& [key, rounds] : log_.runs) {
    ASSERT_EQ(rounds.size(), 1u) << key;
    EXPECT_GT(rounds[0].scheduled, added) << key;
    EXPECT_LE(rounds[0].scheduled, added + 1s) << key;
    EXPECT_EQ(rounds[0].started, rounds[0].scheduled) << key << ": not run when due";
    slots.insert(Slot(rounds[0].scheduled));
  }
  EXPECT_GE(slots.size(), 35u);
  EXPECT_LE(slots.size(), 50u);
  // A kind started later shares the same slots: the grid counts from the scheduler's epoch.
  sched_->SetKind("http", std::make_shared<ClockedKind>(io_, log_, 1s, 0ms), Peers(20, "h"));
  time_.Advance(1s);
  for (int i = 0; i < 20; ++i) {
    const auto& rounds = log_.runs["peer:h" + std::to_string(i)];
    ASSERT_FALSE(rounds.empty());
    Slot(rounds[0].scheduled);
  }
  EXPECT_EQ(log_.overlaps, 0);
  EXPECT_EQ(sched_->skipped_rounds(), 0u);
}

TEST_F(SchedulerTest, RoundsKeepAFixedRateFromTheirPhase) {
  sched_->SetKind("rtt", std::make_shared<ClockedKind>(io_, log_, 100ms, 30ms), Peers(3));
  time_.Advance(1s);
  for (const auto& [key, rounds] : log_.runs) {
    // The first round in (0, 100 ms], then one every 100 ms: 10 in the second.
    ASSERT_EQ(rounds.size(), 10u) << key;
    ExpectEvery(rounds, 100ms, key);
  }
  EXPECT_EQ(sched_->skipped_rounds(), 0u);
  EXPECT_EQ(Skipped("rtt"), 0);
  ExpectStartDelays("rtt", 30, 0.0);  // every round started on time
}

TEST_F(SchedulerTest, ARoundStillRunningMakesTheNextSkippedNotOverlapped) {
  // 70 ms rounds every 20 ms: a round started at s ends at s + 70 ms, so s + 20, s + 40 and
  // s + 60 are skipped (counted) and the next round starts at s + 80 ms.
  sched_->SetKind("rtt", std::make_shared<ClockedKind>(io_, log_, 20ms, 70ms), Peers(1));
  time_.Advance(20ms + 5 * 80ms);  // the first round (phase 20 ms) and five more
  const auto& rounds = log_.runs["peer:p0"];
  ASSERT_EQ(rounds.size(), 6u);
  ExpectEvery(rounds, 80ms, "p0");
  EXPECT_EQ(log_.overlaps, 0);
  EXPECT_EQ(sched_->skipped_rounds(), 15u);  // 3 after each of the 5 rounds that ended
  EXPECT_EQ(Skipped("rtt"), 15);
  ExpectStartDelays("rtt", 6, 0.0);
}

TEST_F(SchedulerTest, ALateWakeUpIsCountedAndSkipsInsteadOfCatchingUp) {
  // The loop gets to the first round 50 ms late (the clock jumps): the round runs once, with
  // its intended start; the two rounds that fell due meanwhile are skipped, not run back to
  // back, and the next keeps the grid.
  sched_->SetKind("rtt", std::make_shared<ClockedKind>(io_, log_, 20ms, 0ms), Peers(1));
  time_.Jump(70ms);  // phase: the only slot, 20 ms; woken at 70 ms
  const auto& rounds = log_.runs["peer:p0"];
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_EQ(rounds[0].scheduled, epoch_ + 20ms);
  EXPECT_EQ(rounds[0].started, epoch_ + 70ms);
  EXPECT_EQ(sched_->skipped_rounds(), 2u);  // 40 and 60 ms
  time_.Advance(10ms);
  ASSERT_EQ(rounds.size(), 2u);
  EXPECT_EQ(rounds[1].scheduled, epoch_ + 80ms);
  EXPECT_EQ(rounds[1].started, epoch_ + 80ms);
  ExpectStartDelays("rtt", 2, 0.05);
}

TEST_F(SchedulerTest, RemovedPeersStopAndKeptPeersGoOnUndisturbed) {
  sched_->SetKind("rtt", std::make_shared<ClockedKind>(io_, log_, 100ms, 50ms), Peers(2));
  time_.Advance(100ms);
  auto kept = log_.runs["peer:p0"];
  topology::PeerDiff diff;
  diff.removed = {Peers(2)[1]};
  diff.added = Peers(1, "q");
  sched_->UpdatePeers(diff);
  EXPECT_EQ(log_.cancelled["peer:p1"], 1);
  EXPECT_EQ(log_.removed["peer:p1"], 1);
  EXPECT_EQ(log_.cancelled["peer:p0"], 0);
  auto removed_runs = log_.runs["peer:p1"].size();
  time_.Advance(1s);
  EXPECT_EQ(log_.runs["peer:p1"].size(), removed_runs);
  EXPECT_EQ(log_.runs["peer:p0"].size(), kept.size() + 10);
  EXPECT_EQ(log_.runs["peer:q0"].size(), 10u);
  // Shutdown cancels every round but keeps the series for a last scrape.
  sched_->StopAll();
  EXPECT_EQ(sched_->size(), 0u);
  EXPECT_EQ(log_.removed["peer:p0"], 0);
  time_.Advance(1s);
  EXPECT_EQ(log_.runs["peer:p0"].size(), kept.size() + 10);
  EXPECT_EQ(log_.overlaps, 0);
}

// Kinds whose targets are not peers (the DNS probe's names): scheduled by their own keys,
// untouched by peer changes, stopped and cleaned up like peer probes.
TEST_F(SchedulerTest, KindWithOwnTargetsIgnoresPeers) {
  std::vector<std::string> targets = {"a.example", "b.example"};
  sched_->SetKind("fixed", std::make_shared<ClockedKind>(io_, log_, 20ms, 0ms, targets), Peers(1));
  EXPECT_EQ(sched_->size(), 2u);
  time_.Advance(80ms);
  EXPECT_EQ(log_.runs["a.example"].size(), 4u);
  EXPECT_EQ(log_.runs["b.example"].size(), 4u);
  topology::PeerDiff diff;
  diff.added = Peers(1, "q");
  diff.removed = Peers(1);
  sched_->UpdatePeers(diff);
  EXPECT_EQ(sched_->size(), 2u);
  EXPECT_EQ(log_.for_peer, 0);
  sched_->SetKind("fixed", nullptr, {});
  EXPECT_EQ(sched_->size(), 0u);
  EXPECT_EQ(log_.removed["a.example"] + log_.removed["b.example"], 2);
}

// The start delay follows metrics.native_histograms as every other histogram does
// (Metrics::NativeStoreFor): native buckets while on, none and the old ones dropped when off.
TEST(SchedulerMetricsTest, StartDelayHasNativeBucketsWhileTheyAreOn) {
  metrics::Metrics m;
  prometheus::Registry registry;
  SchedulerMetrics sm(registry, &m);
  EXPECT_FALSE(sm.start_delay("rtt").native()) << "off by default";
  m.SetNativeHistograms(true);
  metrics::HistogramSeries rtt = sm.start_delay("rtt");
  ASSERT_TRUE(rtt.native());
  rtt.Observe(0.002);
  EXPECT_EQ(sm.start_delay("rtt").native(), rtt.native()) << "the same series again";
  EXPECT_EQ(rtt.native()->Snapshot().count, 1u);
  sm.start_delay("dns");
  EXPECT_EQ(m.native_histograms()->size(), 2u);
  m.SetNativeHistograms(false);
  EXPECT_FALSE(sm.start_delay("rtt").native());
  EXPECT_EQ(m.native_histograms()->size(), 0u);
  EXPECT_FALSE(SchedulerMetrics(registry).start_delay("rtt").native()) << "without Metrics";
}

}  // namespace
}  // namespace podnet::scheduler
