#pragma once

// A clock the test moves by hand, for the code that takes its clock as a template parameter
// (scheduler::BasicScheduler, discovery::kubernetes::BasicKubernetesDiscovery,
// app::BasicReloadPacer). Asio's timers accept any clock (basic_waitable_timer<Clock,
// WaitTraits>): with this one, a timer is due when the test has moved the time past it, never
// because real time passed, so a test of backoff, pacing or phases is exact and runs in
// microseconds, however loaded the machine.

#include <atomic>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/wait_traits.hpp>
#include <chrono>
#include <cstddef>
#include <functional>

#include "tests/unit/testing/loop.h"

namespace podnet::testing {

/// A steady clock whose now() moves only by Set/Advance. Its time_point is steady_clock's (the
/// standard allows a clock to share another's time_point), so code written for steady_clock
/// time points (probes::PeerProbe::Run's `scheduled`) takes its times unchanged. The time is
/// one for the process: set it at the start of each test. Any thread may read it.
struct ManualClock {
  using duration = std::chrono::steady_clock::duration;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::steady_clock::time_point;
  static constexpr bool is_steady = true;

  static time_point now() { return time_point(duration(ticks_.load(std::memory_order_acquire))); }
  /// Any start: a test's expectations are relative to it. Going back is allowed only here.
  static void Set(time_point t) { ticks_.store(t.time_since_epoch().count()); }
  static void Advance(duration d) { ticks_.fetch_add(d.count()); }

 private:
  static inline std::atomic<rep> ticks_{0};
};

}  // namespace podnet::testing

/// Asio asks the wait traits how long the reactor may sleep for a timer due in `d` of the
/// clock's time. Real time has nothing to do with ManualClock: a timer already due (d ≤ 0) is
/// collected at once, one in the future never wakes the loop by itself (the 5-minute ceiling of
/// the reactor applies); VirtualTime::Settle makes the loop look again after the test moved
/// the time.
template <>
struct boost::asio::wait_traits<podnet::testing::ManualClock> {
  using Clock = podnet::testing::ManualClock;
  static Clock::duration to_wait_duration(const Clock::duration& d) {
    return d <= Clock::duration::zero() ? Clock::duration::zero() : (Clock::duration::max)();
  }
  static Clock::duration to_wait_duration(const Clock::time_point& t) {
    return to_wait_duration(t - Clock::now());
  }
};

namespace podnet::testing {

using ManualTimer = boost::asio::basic_waitable_timer<ManualClock>;

/// Drives an io_context on the test's own thread under ManualClock: the test moves the time,
/// and everything due by then runs, in order of its due times, before the call returns.
class VirtualTime {
 public:
  /// Starts the clock at `start` (a round number of seconds, so that a 20 ms grid from it is
  /// exact).
  explicit VirtualTime(
      boost::asio::io_context& io,
      ManualClock::time_point start = ManualClock::time_point(std::chrono::hours(1)))
      : io_(io), kick_(io) {
    ManualClock::Set(start);
  }

  static ManualClock::time_point now() { return ManualClock::now(); }

  /// Runs every handler that is ready or due at the current time, and what those make due in
  /// turn, until nothing more is. The loop sees a ManualClock timer only when it looks at its
  /// timer queues, which it does when a timer becomes the first to expire: a timer due at the
  /// beginning of time is always that, and its completion shows that the loop has looked
  /// (every timer due by now was collected with it).
  void Settle() {
    for (int round = 0; round < 10000; ++round) {
      bool looked = false;
      kick_.expires_at((ManualClock::time_point::min)());
      kick_.async_wait([&looked](boost::system::error_code) { looked = true; });
      std::size_t ran = 0;
      while (!looked) {
        if (io_.stopped()) io_.restart();
        ran += io_.run_one();
      }
      ran += io_.poll();
      if (ran == 1) return;  // only the look itself: nothing else was due
    }
    ADD_FAILURE() << "VirtualTime::Settle: handlers kept coming after 10000 rounds";
  }

  /// Moves the time on by `d` in steps of `step`, settling after each: a timer due within the
  /// span runs at most `step` after its due time (exactly on it when due times are multiples of
  /// `step` from the start).
  void Advance(ManualClock::duration d, ManualClock::duration step = std::chrono::milliseconds(1)) {
    Settle();
    while (d > ManualClock::duration::zero()) {
      auto s = d < step ? d : step;
      ManualClock::Advance(s);
      d -= s;
      Settle();
    }
  }

  /// Runs the loop (real I/O: a socket's answer) until `done` holds, without moving the time;
  /// false when it does not within the real `timeout` (× TimeScale()), which only bounds a
  /// failing test's wait and asserts nothing about speed.
  bool RunUntil(const std::function<bool()>& done,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    auto deadline = std::chrono::steady_clock::now() + timeout * TimeScale();
    Settle();
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      if (io_.stopped()) io_.restart();
      io_.run_one_for(std::chrono::milliseconds(10));
      Settle();
    }
    return true;
  }

 private:
  boost::asio::io_context& io_;
  ManualTimer kick_;
};

}  // namespace podnet::testing
