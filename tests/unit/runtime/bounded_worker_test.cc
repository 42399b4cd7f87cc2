#include "exporter/runtime/bounded_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <vector>

#include "exporter/runtime/loop_role.h"

namespace podnet::runtime {
namespace {

TEST(BoundedWorkerTest, RunsJobsInOrderOffEveryLoop) {
  std::vector<int> order;
  std::promise<void> done;
  {
    BoundedWorker worker(4);
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(worker.TryPost([&order, i] {
        EXPECT_EQ(CurrentLoop(), Loop::kNone);
        order.push_back(i);
      }));
    }
    ASSERT_TRUE(worker.TryPost([&] { done.set_value(); }));
    done.get_future().wait();
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

TEST(BoundedWorkerTest, RefusesBeyondItsCapacityAndDropsWhatIsQueuedAtTheEnd) {
  std::promise<void> release, started;
  std::atomic<int> ran{0};
  {
    BoundedWorker worker(2);
    auto gate = release.get_future().share();
    ASSERT_TRUE(worker.TryPost([&, gate] {
      started.set_value();
      gate.wait();
      ++ran;
    }));
    started.get_future().wait();                   // one running
    ASSERT_TRUE(worker.TryPost([&] { ++ran; }));   // one queued
    EXPECT_FALSE(worker.TryPost([&] { ++ran; }));  // the third: refused
    release.set_value();                           // the running one ends; the destructor
  }                                                // may drop the queued one
  EXPECT_GE(ran, 1);
  EXPECT_LE(ran, 2);
}

TEST(BoundedWorkerTest, AJobsExceptionDoesNotStopTheWorker) {
  std::promise<void> done;
  BoundedWorker worker(2, [] {});
  ASSERT_TRUE(worker.TryPost([] { throw std::runtime_error("job failed"); }));
  ASSERT_TRUE(worker.TryPost([&] { done.set_value(); }));
  done.get_future().wait();
}

}  // namespace
}  // namespace podnet::runtime
