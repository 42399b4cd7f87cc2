// /-/reload pacing on a clock the test moves: at most one reload start per interval, requests
// in between share the next one, at most 16 wait. Exact times; nothing waits for real time.
#include "exporter/app/reload_pacer.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/testing/manual_clock.h"

namespace podnet::app {
namespace {

using namespace std::chrono_literals;
using podnet::testing::ManualClock;
using podnet::testing::VirtualTime;
using Pacer = BasicReloadPacer<ManualClock>;

class ReloadPacerTest : public ::testing::Test {
 protected:
  ReloadPacerTest()
      : time_(io_), start_(VirtualTime::now()), pacer_(io_, 1s, 16, [this](Pacer::Batch batch) {
          reloads_.push_back({VirtualTime::now() - start_, std::move(batch)});
        }) {}

  // Sends request `id`: its answer, when it comes, is recorded as answered_[id].
  void Post(int id) {
    pacer_.Request([this, id](responders::HttpResponse r) { answered_.push_back({id, r.status}); });
  }
  // Ends the last reload started, answering its requests with 200.
  void FinishLast() {
    ASSERT_FALSE(reloads_.empty());
    for (auto& respond : reloads_.back().batch) respond({200, "text/plain", "Reloaded.\n"});
    pacer_.Finished();
  }
  std::vector<ManualClock::duration> Starts() const {
    std::vector<ManualClock::duration> at;
    for (const auto& r : reloads_) at.push_back(r.at);
    return at;
  }

  struct Reload {
    ManualClock::duration at;  // since the test's start
    Pacer::Batch batch;
  };
  boost::asio::io_context io_;
  VirtualTime time_;
  ManualClock::time_point start_;
  std::vector<Reload> reloads_;
  std::vector<std::pair<int, int>> answered_;  // (request, status)
  Pacer pacer_;
};

TEST_F(ReloadPacerTest, TheFirstStartsAtOnceAndTheNextAfterTheInterval) {
  Post(1);
  ASSERT_EQ(reloads_.size(), 1u);
  EXPECT_EQ(reloads_[0].at, 0ms);
  time_.Advance(50ms);
  FinishLast();
  EXPECT_EQ(answered_, (std::vector<std::pair<int, int>>{{1, 200}}));
  // A request 300 ms after the first start waits for 1 s after it, not for 1 s after itself.
  time_.Advance(250ms);
  Post(2);
  time_.Advance(699ms);
  EXPECT_EQ(reloads_.size(), 1u);
  time_.Advance(1ms);
  ASSERT_EQ(reloads_.size(), 2u);
  EXPECT_EQ(reloads_[1].at, 1000ms);
  FinishLast();
  // Quiet for longer than the interval: the next starts at once.
  time_.Advance(5s);
  Post(3);
  ASSERT_EQ(reloads_.size(), 3u);
  EXPECT_EQ(reloads_[2].at, 6000ms);
}

TEST_F(ReloadPacerTest, RequestsWhileOneRunsShareTheNextAndItStartsAfterTheyCame) {
  Post(1);
  time_.Advance(100ms);
  Post(2);  // while the first reload runs
  time_.Advance(100ms);
  Post(3);
  // The first reload takes 1.5 s (a slow file system): past the interval, the next starts as
  // soon as it ends, with both waiting requests, and never while it runs.
  time_.Advance(1300ms);
  EXPECT_EQ(reloads_.size(), 1u);
  FinishLast();
  ASSERT_EQ(reloads_.size(), 2u);
  EXPECT_EQ(reloads_[1].at, 1500ms);
  EXPECT_EQ(reloads_[1].batch.size(), 2u);
  FinishLast();
  EXPECT_EQ(answered_, (std::vector<std::pair<int, int>>{{1, 200}, {2, 200}, {3, 200}}));
}

TEST_F(ReloadPacerTest, ALoopOfPostsBecomesOneReloadASecond) {
  // A POST every 100 ms for 5 s, each reload done 10 ms after it starts: reloads start on the
  // second, each with the requests of the second before it (the one at 1 s has the nine of
  // 0.1 to 0.9 s; a POST on the second comes just after that second's reload started).
  std::size_t finished = 0;
  for (int i = 0; i < 50; ++i) {
    Post(i);
    time_.Advance(10ms);
    if (reloads_.size() > finished) {
      FinishLast();
      ++finished;
    }
    time_.Advance(90ms);
  }
  EXPECT_EQ(Starts(), (std::vector<ManualClock::duration>{0s, 1s, 2s, 3s, 4s, 5s}));
  std::vector<std::size_t> sizes;
  for (const auto& r : reloads_) sizes.push_back(r.batch.size());
  EXPECT_EQ(sizes, (std::vector<std::size_t>{1, 9, 10, 10, 10, 10}));
  EXPECT_EQ(pacer_.waiting(), 0u);
}

TEST_F(ReloadPacerTest, AtMost16Wait) {
  Post(0);  // runs
  for (int i = 1; i <= 16; ++i) {
    EXPECT_FALSE(pacer_.full()) << i;
    Post(i);
  }
  EXPECT_TRUE(pacer_.full());
  EXPECT_EQ(pacer_.waiting(), 16u);
  FinishLast();
  time_.Advance(1s);
  ASSERT_EQ(reloads_.size(), 2u);
  EXPECT_EQ(reloads_[1].batch.size(), 16u);
  EXPECT_FALSE(pacer_.full());
}

}  // namespace
}  // namespace podnet::app
