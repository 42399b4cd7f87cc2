// Kinds whose targets are not peers (the DNS probe's names): scheduled by their own keys,
// untouched by peer changes, stopped and cleaned up like peer probes.
#include "exporter/scheduler/scheduler.h"

#include <boost/asio/steady_timer.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <map>

#include "tests/unit/testing/loop.h"

namespace podnet::scheduler {
namespace {

using namespace std::chrono_literals;

struct Counts {
  std::map<std::string, int> runs;
  std::map<std::string, int> removed;
  int for_peer = 0;
};

class CountingProbe : public probes::PeerProbe {
 public:
  CountingProbe(Counts& c, std::string key) : c_(c), key_(std::move(key)) {}
  void Run(std::chrono::steady_clock::time_point, std::function<void()> done) override {
    ++c_.runs[key_];
    done();
  }
  void Cancel() override {}
  void RemoveSeries() override { ++c_.removed[key_]; }

 private:
  Counts& c_;
  std::string key_;
};

class FixedKind : public probes::ProbeKind {
 public:
  explicit FixedKind(Counts& c) : c_(c) {}
  std::string_view name() const override { return "fixed"; }
  config::Duration interval() const override { return 20ms; }
  std::shared_ptr<probes::PeerProbe> ForPeer(const topology::Peer& p) override {
    ++c_.for_peer;
    return std::make_shared<CountingProbe>(c_, "peer:" + p.name);
  }
  std::vector<std::string> Targets() const override { return {"a.example", "b.example"}; }
  std::shared_ptr<probes::PeerProbe> ForTarget(const std::string& key) override {
    return std::make_shared<CountingProbe>(c_, key);
  }

 private:
  Counts& c_;
};

TEST(SchedulerTest, KindWithOwnTargetsIgnoresPeers) {
  testing::LoopThread loop;
  Counts counts;
  topology::Peer peer;
  peer.name = "p1";
  auto sched = loop.Run([&] { return std::make_unique<Scheduler>(loop.io()); });
  loop.Run([&] {
    sched->SetKind("fixed", std::make_shared<FixedKind>(counts), {peer});
    return 0;
  });
  EXPECT_EQ(loop.Run([&] { return sched->size(); }), 2u);
  EXPECT_TRUE(testing::Eventually([&] {
    return loop.Run([&] { return counts.runs["a.example"] >= 3 && counts.runs["b.example"] >= 3; });
  }));
  loop.Run([&] {
    topology::PeerDiff diff;
    topology::Peer added;
    added.name = "p2";
    diff.added = {added};
    diff.removed = {peer};
    sched->UpdatePeers(diff);
    return 0;
  });
  EXPECT_EQ(loop.Run([&] { return sched->size(); }), 2u);
  EXPECT_EQ(loop.Run([&] { return counts.for_peer; }), 0);
  loop.Run([&] {
    sched->SetKind("fixed", nullptr, {});
    return 0;
  });
  EXPECT_EQ(loop.Run([&] { return sched->size(); }), 0u);
  EXPECT_EQ(loop.Run([&] { return counts.removed["a.example"] + counts.removed["b.example"]; }), 2);
  loop.Run([&] {
    sched.reset();
    return 0;
  });
}

// A round that outlasts its interval: held on a timer of the loop, then done.
class SlowProbe : public probes::PeerProbe {
 public:
  SlowProbe(boost::asio::io_context& io, int& runs) : timer_(io), runs_(runs) {}
  void Run(std::chrono::steady_clock::time_point, std::function<void()> done) override {
    ++runs_;
    timer_.expires_after(70ms);
    timer_.async_wait([done](boost::system::error_code ec) {
      if (!ec) done();
    });
  }
  void Cancel() override { timer_.cancel(); }
  void RemoveSeries() override {}

 private:
  boost::asio::steady_timer timer_;
  int& runs_;
};

class SlowKind : public probes::ProbeKind {
 public:
  SlowKind(boost::asio::io_context& io, int& runs) : io_(io), runs_(runs) {}
  std::string_view name() const override { return "slow"; }
  config::Duration interval() const override { return 20ms; }
  std::shared_ptr<probes::PeerProbe> ForPeer(const topology::Peer&) override {
    return std::make_shared<SlowProbe>(io_, runs_);
  }

 private:
  boost::asio::io_context& io_;
  int& runs_;
};

TEST(SchedulerTest, SkippedRoundsAndStartDelaysAreExported) {
  testing::LoopThread loop;
  prometheus::Registry registry;
  SchedulerMetrics metrics(registry);
  int runs = 0;
  topology::Peer peer;
  peer.name = "p1";
  auto sched = loop.Run([&] { return std::make_unique<Scheduler>(loop.io(), &metrics); });
  loop.Run([&] {
    sched->SetKind("rtt", std::make_shared<SlowKind>(loop.io(), runs), {peer});
    return 0;
  });
  ASSERT_TRUE(testing::Eventually([&] { return loop.Run([&] { return runs >= 3; }); }));
  loop.Run([&] {
    sched->StopAll();
    return 0;
  });
  auto [skipped, started] = loop.Run([&] { return std::pair(sched->skipped_rounds(), runs); });
  // 70 ms rounds every 20 ms: each round after the first makes two or three skipped.
  EXPECT_GE(skipped, 2u * static_cast<std::uint64_t>(started - 1));
  EXPECT_EQ(testing::CounterValue(registry, "podnet_probe_rounds_skipped_total", {{"probe", "rtt"}}),
            static_cast<double>(skipped));
  auto delay = testing::FindSeries(registry, "podnet_probe_round_start_delay_seconds",
                                   {{"probe", "rtt"}});
  ASSERT_TRUE(delay.has_value());
  EXPECT_EQ(delay->histogram.sample_count, static_cast<std::uint64_t>(started));
  loop.Run([&] {
    sched.reset();
    return 0;
  });
}

}  // namespace
}  // namespace podnet::scheduler
