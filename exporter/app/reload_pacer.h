#pragma once

#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "exporter/responders/http_server.h"

namespace podnet::app {

/// Paces `POST /-/reload` on the responder loop: a reload starts at most once per `interval`
/// (a loop of POSTs must not become a loop of reloads and log lines); requests that come
/// meanwhile wait, up to `max_waiting`, and all share the next reload, which starts after the
/// last of them came (so it reads the file they meant). A reload starts when none is running,
/// someone waits, and `interval` has passed since the last start.
///
/// `Clock` is the time it waits by (a boost::asio::basic_waitable_timer<Clock>):
/// std::chrono::steady_clock in the exporter (ReloadPacer), a hand-moved clock in tests. Not
/// thread-safe: use it on its loop.
template <typename Clock>
class BasicReloadPacer {
 public:
  using Batch = std::vector<responders::HttpRespond>;

  /// `start` begins one reload for the requests of `batch` (each must be answered once) and
  /// later calls Finished() on this loop, after which the next one may start.
  BasicReloadPacer(boost::asio::io_context& io, typename Clock::duration interval,
                   std::size_t max_waiting, std::function<void(Batch)> start)
      : timer_(io), interval_(interval), max_waiting_(max_waiting), start_(std::move(start)) {}

  /// max_waiting requests wait already: the caller refuses the next (429, Retry-After).
  bool full() const { return waiting_.size() >= max_waiting_; }
  std::size_t waiting() const { return waiting_.size(); }

  /// Queues a request (not when full()) for the next reload.
  void Request(responders::HttpRespond respond) {
    waiting_.push_back(std::move(respond));
    MaybeStart();
  }

  /// The reload `start` began has ended.
  void Finished() {
    running_ = false;
    MaybeStart();
  }

 private:
  void MaybeStart() {
    if (running_ || waiting_.empty()) return;
    auto now = Clock::now();
    if (started_once_ && now < last_start_ + interval_) {
      timer_.expires_at(last_start_ + interval_);
      timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) MaybeStart();
      });
      return;
    }
    running_ = true;
    started_once_ = true;
    last_start_ = now;
    Batch batch = std::move(waiting_);
    waiting_.clear();
    start_(std::move(batch));
  }

  boost::asio::basic_waitable_timer<Clock> timer_;
  typename Clock::duration interval_;
  std::size_t max_waiting_;
  std::function<void(Batch)> start_;
  Batch waiting_;
  bool running_ = false;
  bool started_once_ = false;
  typename Clock::time_point last_start_{};
};

using ReloadPacer = BasicReloadPacer<std::chrono::steady_clock>;

}  // namespace podnet::app
