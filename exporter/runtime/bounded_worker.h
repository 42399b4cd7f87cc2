#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace podnet::runtime {

/// One thread that runs jobs posted to it, one at a time, in order, with at most `capacity`
/// jobs queued or running: for work that is slow on purpose (a bcrypt check) and must not
/// run on any event loop. A job that needs a loop afterwards posts its result there. The thread
/// binds no loop role (PODNET_DCHECK_NOT_LOOP holds on it for every loop).
class BoundedWorker {
 public:
  /// Starts the thread; `on_start` runs first on it (e.g. to lower its priority).
  explicit BoundedWorker(std::size_t capacity, std::function<void()> on_start = {});
  /// Drops the jobs still queued (unrun), waits for the running one and joins the thread.
  ~BoundedWorker();
  BoundedWorker(const BoundedWorker&) = delete;
  BoundedWorker& operator=(const BoundedWorker&) = delete;

  /// Queues `job`; false (and `job` dropped) when `capacity` jobs are queued or running.
  /// A job's exception is caught and dropped (the job must report its own failures).
  bool TryPost(std::function<void()> job);
  /// The same for a job that must not wait behind a full queue: it goes before the jobs queued
  /// so far, with room for `extra` jobs beyond `capacity`.
  bool TryPostFirst(std::function<void()> job, std::size_t extra);

 private:
  void Run(std::function<void()> on_start);
  bool Post(std::function<void()> job, bool first, std::size_t extra);

  std::size_t capacity_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  std::size_t running_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace podnet::runtime
