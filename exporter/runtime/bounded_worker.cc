#include "exporter/runtime/bounded_worker.h"

#include <utility>

namespace podnet::runtime {

BoundedWorker::BoundedWorker(std::size_t capacity, std::function<void()> on_start)
    : capacity_(capacity),
      thread_([this, f = std::move(on_start)]() mutable { Run(std::move(f)); }) {}

BoundedWorker::~BoundedWorker() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    dropped.swap(jobs_);
  }
  wake_.notify_all();
  thread_.join();
}

bool BoundedWorker::TryPost(std::function<void()> job) { return Post(std::move(job), false, 0); }

bool BoundedWorker::TryPostFirst(std::function<void()> job, std::size_t extra) {
  return Post(std::move(job), true, extra);
}

bool BoundedWorker::Post(std::function<void()> job, bool first, std::size_t extra) {
  {
    std::lock_guard lock(mu_);
    if (stop_ || jobs_.size() + running_ >= capacity_ + extra) return false;
    if (first) {
      jobs_.push_front(std::move(job));
    } else {
      jobs_.push_back(std::move(job));
    }
  }
  wake_.notify_one();
  return true;
}

void BoundedWorker::Run(std::function<void()> on_start) {
  if (on_start) on_start();
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    running_ = 1;
    lock.unlock();
    try {
      job();
    } catch (...) {  // a job reports its own failures; the worker keeps going
    }
    job = nullptr;  // what it holds goes here, not under the lock
    lock.lock();
    running_ = 0;
  }
}

}  // namespace podnet::runtime
