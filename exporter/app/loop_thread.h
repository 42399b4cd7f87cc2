#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>
#include <thread>

#include "exporter/runtime/loop_role.h"

namespace podnet::app {

/// A loop that times things (the probe loop, the responder loop) on a thread of its own: the
/// thread binds `role` (runtime::BindLoop), asks the kernel for a short time slice so that it
/// preempts the control loop's long runs when it wakes (runtime::RequestShortSlice), and runs
/// `io` until Join(), even while `io` has no work. An exception that escapes `io` ends the
/// process (log::RunOrExit). Start() and Join() from the thread that owns the App.
class LoopThread {
 public:
  /// `name`: a static string for log lines ("probe", "responder").
  LoopThread(boost::asio::io_context& io, runtime::Loop role, const char* name)
      : io_(io), role_(role), name_(name) {}
  ~LoopThread() { Join(); }
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;

  void Start();
  /// Stops `io` and waits for the thread (nothing of the loop runs after it returns).
  void Join();

 private:
  boost::asio::io_context& io_;
  runtime::Loop role_;
  const char* name_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread thread_;
};

}  // namespace podnet::app
