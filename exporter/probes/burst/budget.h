#pragma once

#include <chrono>
#include <cstdint>
#include <deque>

namespace podnet::probes::burst {

/// A byte budget over a sliding window (one hour for max_bytes_per_hour): what bursts sent in
/// the last `window`, and what is left. Not thread-safe (the probe loop owns it).
class ByteBudget {
 public:
  using Clock = std::chrono::steady_clock;

  ByteBudget(std::uint64_t limit, Clock::duration window = std::chrono::hours(1))
      : limit_(limit), window_(window) {}

  /// Bytes that may still be sent at `now` (0 when the window is full).
  std::uint64_t Remaining(Clock::time_point now);
  /// Bytes charged within the window ending at `now`.
  std::uint64_t Used(Clock::time_point now);
  /// Charges `bytes` sent at `at` (a burst's end).
  void Charge(Clock::time_point at, std::uint64_t bytes);
  std::uint64_t limit() const { return limit_; }
  /// A new limit (a reload); what was charged stays charged.
  void set_limit(std::uint64_t limit) { limit_ = limit; }

 private:
  void Expire(Clock::time_point now);

  std::uint64_t limit_;
  Clock::duration window_;
  struct Entry {
    Clock::time_point at;
    std::uint64_t bytes;
  };
  std::deque<Entry> entries_;
  std::uint64_t used_ = 0;
};

}  // namespace podnet::probes::burst
