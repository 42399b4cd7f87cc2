// The round lifecycle every probe kind inherits (peer_probe.h), proved once here so that the
// kinds' own tests need not: done exactly once per round (complete, cancel, remove), stale
// completions dropped by the generation, series and error counters removed with the probe.
#include "exporter/probes/peer_probe.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>
#include <string>

#include "exporter/metrics/metrics.h"
#include "tests/unit/testing/loop.h"

namespace podnet::probes {
namespace {

using namespace std::chrono_literals;
using podnet::testing::CounterValue;
using podnet::testing::FindSeries;

const topology::Self kSelf{"probe-a", "node-1", "zone-a"};

topology::Peer MakePeer(std::string name) {
  topology::Peer p;
  p.name = std::move(name);
  p.node = "node-2";
  p.zone = "zone-a";
  p.path = topology::Classify(kSelf, p.node, p.zone);
  return p;
}

// A kind whose measurement is one timer of `length` per round; each finished round counts
// podnet_test_rounds_total. Keeps the completion handlers it made, so a test can fire a stale
// one on purpose.
class TimerProbe : public PeerProbeBase {
 public:
  TimerProbe(ProbeEnv& env, const topology::Peer& peer, prometheus::Family<prometheus::Counter>& f,
             std::chrono::milliseconds length)
      : PeerProbeBase(env, "test", peer), timer_(env.io), length_(length) {
    rounds_ = &AddSeries(f, {});
  }

  int started = 0;
  int stopped = 0;
  std::function<void()> last_handler;  // the current round's completion, made by IfCurrent

  using PeerProbeBase::NextGeneration;

 private:
  void StartRound(std::chrono::steady_clock::time_point) override {
    ++started;
    last_handler = IfCurrent(this, [](auto& self) { self.Complete(); });
    timer_.expires_after(length_);
    timer_.async_wait(IfCurrent(this, [](auto& self, boost::system::error_code ec) {
      if (!ec) self.Complete();
    }));
  }
  void StopRound() override {
    ++stopped;
    timer_.cancel();
  }
  void Complete() {
    rounds_->Increment();
    EndRound();
  }

  boost::asio::steady_timer timer_;
  std::chrono::milliseconds length_;
  prometheus::Counter* rounds_;
};

class PeerProbeBaseTest : public ::testing::Test {
 protected:
  std::shared_ptr<TimerProbe> Make(const std::string& name, std::chrono::milliseconds length) {
    return std::make_shared<TimerProbe>(env_, MakePeer(name), family_, length);
  }

  // Runs the loop until it has nothing left to do (a cancelled timer's handler included).
  void Drain() {
    io_.restart();
    io_.run();
  }

  double Rounds(const std::string& peer) {
    return CounterValue(metrics_.registry(), "podnet_test_rounds_total", {{"peer", peer}});
  }

  boost::asio::io_context io_;
  metrics::Metrics metrics_;
  ProbeEnv env_{io_, metrics_, kSelf};
  prometheus::Family<prometheus::Counter>& family_ = prometheus::BuildCounter()
                                                         .Name("podnet_test_rounds_total")
                                                         .Help("t")
                                                         .Register(metrics_.registry());
};

TEST_F(PeerProbeBaseTest, ACompletedRoundCallsDoneOnce) {
  auto probe = Make("a", 1ms);
  int done = 0;
  probe->Run(std::chrono::steady_clock::now(), [&] { ++done; });
  EXPECT_EQ(done, 0);
  Drain();
  EXPECT_EQ(done, 1);
  EXPECT_EQ(Rounds("a"), 1);
  // A completion of the ended round that comes after all (a second reply, a late callback)
  // finds no round open: done stays at one.
  probe->last_handler();
  EXPECT_EQ(done, 1);
  probe->Run(std::chrono::steady_clock::now(), [&] { ++done; });
  Drain();
  EXPECT_EQ(done, 2);
  EXPECT_EQ(probe->started, 2);
}

TEST_F(PeerProbeBaseTest, CancelEndsTheRoundOnceAndDropsItsCompletion) {
  auto probe = Make("a", 1h);
  int done = 0;
  probe->Run(std::chrono::steady_clock::now(), [&] { ++done; });
  auto completion = probe->last_handler;
  probe->Cancel();
  EXPECT_EQ(done, 1);
  EXPECT_EQ(probe->stopped, 1);
  EXPECT_TRUE(probe->cancelled());
  completion();  // the measurement finishing after all: stale
  Drain();       // the cancelled timer's handler: stale too
  EXPECT_EQ(done, 1);
  EXPECT_EQ(Rounds("a"), 0);
  probe->Cancel();  // again: nothing more to end
  EXPECT_EQ(done, 1);
  // A cancelled probe's later rounds end at once, without measuring.
  int again = 0;
  probe->Run(std::chrono::steady_clock::now(), [&] { ++again; });
  EXPECT_EQ(again, 1);
  EXPECT_EQ(probe->started, 1);
}

TEST_F(PeerProbeBaseTest, CancelWithNoRoundOpenCallsNothing) {
  auto probe = Make("a", 1ms);
  probe->Cancel();
  EXPECT_EQ(probe->stopped, 1);
  int done = 0;
  probe->Run(std::chrono::steady_clock::now(), [&] { ++done; });
  EXPECT_EQ(done, 1);
  EXPECT_EQ(probe->started, 0);
}

TEST_F(PeerProbeBaseTest, AStaleGenerationsCompletionDoesNotEndALaterRound) {
  auto probe = Make("a", 1h);
  int first = 0, second = 0;
  probe->Run(std::chrono::steady_clock::now(), [&] { ++first; });
  auto round_one = probe->last_handler;
  round_one();  // ends round one
  EXPECT_EQ(first, 1);
  probe->Run(std::chrono::steady_clock::now(), [&] { ++second; });
  round_one();  // round one's completion again, now during round two
  EXPECT_EQ(second, 0);
  EXPECT_EQ(Rounds("a"), 1);
  // A step of its own (NextGeneration) inside round two drops that round's earlier handlers
  // too, but not the round: a current handler still ends it.
  auto step_one = probe->last_handler;
  probe->NextGeneration();
  step_one();
  EXPECT_EQ(second, 0);
  probe->Cancel();
  EXPECT_EQ(second, 1);
  Drain();
  EXPECT_EQ(second, 1);
  EXPECT_EQ(first, 1);
}

TEST_F(PeerProbeBaseTest, AHandlerThatOutlivesItsProbeDoesNothing) {
  auto probe = Make("a", 1h);
  int done = 0;
  probe->Run(std::chrono::steady_clock::now(), [&] { ++done; });
  auto completion = probe->last_handler;
  probe.reset();  // the scheduler let go of it (its timer's handler is cancelled with it)
  completion();
  Drain();
  EXPECT_EQ(done, 0);  // nobody is left to tell: the scheduler's target went with the probe
}

TEST_F(PeerProbeBaseTest, ErrorsAreCountedByReasonUnderTheProbesLabels) {
  auto probe = Make("a", 1ms);
  probe->CountError("timeout", "no answer");
  probe->CountError("timeout");
  probe->CountError("refused");
  auto series =
      FindSeries(metrics_.registry(), "podnet_probe_errors_total", {{"reason", "timeout"}});
  ASSERT_TRUE(series);
  EXPECT_EQ(series->counter.value, 2);
  std::map<std::string, std::string> labels;
  for (const auto& l : series->label) labels[l.name] = l.value;
  EXPECT_EQ(labels, (std::map<std::string, std::string>{{"source_node", "node-1"},
                                                        {"source_zone", "zone-a"},
                                                        {"peer", "a"},
                                                        {"peer_node", "node-2"},
                                                        {"peer_zone", "zone-a"},
                                                        {"path_class", "same_zone"},
                                                        {"probe", "test"},
                                                        {"reason", "timeout"}}));
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_probe_errors_total", {{"reason", "refused"}}),
            1);
}

TEST_F(PeerProbeBaseTest, RemoveSeriesEndsTheRoundAndRemovesOnlyThatProbesSeries) {
  auto gone = Make("gone", 1h);
  auto stays = Make("stays", 1ms);
  for (auto* p : {&gone, &stays}) (*p)->CountError("timeout");
  int done = 0;
  gone->Run(std::chrono::steady_clock::now(), [&] { ++done; });
  gone->RemoveSeries();
  EXPECT_EQ(done, 1);
  EXPECT_EQ(Rounds("gone"), -1);
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_probe_errors_total", {{"peer", "gone"}}), -1);
  EXPECT_EQ(Rounds("stays"), 0);
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_probe_errors_total", {{"peer", "stays"}}), 1);
  // After it the probe touches no metric: errors are not counted, rounds end at once.
  gone->CountError("timeout");
  gone->Run(std::chrono::steady_clock::now(), [&] { ++done; });
  EXPECT_EQ(done, 2);
  Drain();
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_probe_errors_total", {{"peer", "gone"}}), -1);
  EXPECT_EQ(Rounds("gone"), -1);
  // The scheduler's order (Cancel, then RemoveSeries) ends the round once too.
  int stays_done = 0;
  stays->Run(std::chrono::steady_clock::now(), [&] { ++stays_done; });
  stays->Cancel();
  stays->RemoveSeries();
  EXPECT_EQ(stays_done, 1);
  EXPECT_EQ(Rounds("stays"), -1);
}

}  // namespace
}  // namespace podnet::probes
