#pragma once

// A clock the test moves by hand, for the code that takes its clock as a template parameter
// (scheduler::BasicScheduler, discovery::kubernetes::BasicKubernetesDiscovery,
// app::BasicReloadPacer). Asio's timers accept any clock (basic_waitable_timer<Clock,
// WaitTraits>): with this one, a timer is due when the test has moved the time past it, never
// because real time passed, so a test of backoff, pacing or phases is exact and runs in
// microseconds, however loaded the machine.

#include <algorithm>
#include <atomic>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/wait_traits.hpp>
#include <chrono>
#include <cstddef>
#include <functional>

#include "tests/unit/testing/loop.h"

namespace podnet::testing {
class VirtualTime;
struct ManualClock;
}  // namespace podnet::testing

template <>
struct boost::asio::wait_traits<podnet::testing::ManualClock>;

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

  /// The due time of the first ManualClock timer of the loop as the loop last looked at its
  /// timer queue (VirtualTime::Settle makes it look), time_point::max() when none waits.
  static time_point next_due() { return time_point(duration(next_due_.load())); }

 private:
  friend struct boost::asio::wait_traits<ManualClock>;
  friend class VirtualTime;
  static inline std::atomic<rep> ticks_{0};
  static inline std::atomic<rep> next_due_{(duration::max)().count()};
};

}  // namespace podnet::testing

/// Asio asks the wait traits how long the reactor may sleep for its first timer, due in `d` of
/// the clock's time, whenever it looks at its timer queues. Real time has nothing to do with
/// ManualClock: a timer already due (d ≤ 0) is collected at once, one in the future never wakes
/// the loop by itself (the reactor's 5-minute ceiling applies) and is noted as next_due();
/// VirtualTime::Settle makes the loop look again after the test moved the time.
template <>
struct boost::asio::wait_traits<podnet::testing::ManualClock> {
  using Clock = podnet::testing::ManualClock;
  static Clock::duration to_wait_duration(const Clock::duration& d) {
    if (d <= Clock::duration::zero()) return Clock::duration::zero();
    Clock::next_due_.store((Clock::now() + d).time_since_epoch().count());
    return (Clock::duration::max)();
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
      ManualClock::next_due_.store((ManualClock::duration::max)().count());
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

  /// Moves the time on by `d`, from one due timer to the next: each runs at its due time
  /// exactly, and what it makes due within the span runs too, in order.
  void Advance(ManualClock::duration d) {
    auto end = ManualClock::now() + d;
    Settle();
    while (ManualClock::next_due() <= end) {
      ManualClock::Set(std::max(ManualClock::now(), ManualClock::next_due()));
      Settle();
    }
    ManualClock::Set(end);
    Settle();
  }

  /// Moves the time to the first timer's due time and runs what is due; false when no
  /// ManualClock timer waits.
  bool AdvanceToNextDue() {
    Settle();
    if (ManualClock::next_due() == (ManualClock::time_point::max)()) return false;
    ManualClock::Set(std::max(ManualClock::now(), ManualClock::next_due()));
    Settle();
    return true;
  }

  /// How long from now the first ManualClock timer is due; duration::max() when none waits.
  ManualClock::duration UntilNextDue() {
    Settle();
    auto next = ManualClock::next_due();
    if (next == (ManualClock::time_point::max)()) return (ManualClock::duration::max)();
    return next - ManualClock::now();
  }

  /// The loop wakes `d` late: the time jumps at once and everything due by then runs together
  /// (a busy or descheduled loop).
  void Jump(ManualClock::duration d) {
    Settle();
    ManualClock::Advance(d);
    Settle();
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
