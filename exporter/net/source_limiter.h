#pragma once

// Admission of work that many sources ask for against one overall budget, so that no number of
// flooding sources can take what a quiet peer needs: the UDP echo responder's replies and bytes
// (responders/echo_limiter.h), the HTTP server's bcrypt checks (web/auth_gate.h).

#include <array>
#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstddef>
#include <map>

#include "exporter/net/address.h"

namespace podnet::net {

/// Token buckets in N dimensions (e.g. replies and bytes) per source address and overall.
///
/// A request of `cost` from a source is admitted when
///  1. its source's share bucket holds `cost` (else kSourceLimited): one source never gets more
///     than `source_rate`, whatever the others do;
///  2. the overall bucket holds `cost` above a reserve (else kRateLimited). The reserve
///     (`reserve` of the overall bucket) is open only to a quiet source: one whose quiet
///     bucket (refilled at `quiet_rate`, a small fraction of the overall rate, and charged by
///     every request, admitted or not) still held `cost`. A flooding source is never quiet, and
///     takes the overall budget only down to the reserve; what refills below it goes to quiet
///     sources first. So K flooding sources deny a quiet peer nothing, however hard each of
///     them floods, unless they pace themselves to stay quiet, which gives them together at
///     most K × quiet_rate (with quiet_rate = rate / 64: 64 sources to take the whole rate).
/// Admitting takes `cost` from the share and the overall bucket.
///
/// At most `max_sources` sources are remembered; when the table is full, sources whose buckets
/// have all refilled (forgetting them changes nothing) are forgotten, at most once a second, and
/// a source that still finds no room is held to the overall budget above the reserve.
/// Not thread-safe (one per responder, used on its loop). Time is passed in (monotonic,
/// non-decreasing), so that tests are deterministic.
template <std::size_t N>
class SourceLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  using Amounts = std::array<double, N>;

  struct Limits {
    Amounts rate{};          // overall, per second
    Amounts burst{};         // overall bucket size
    Amounts source_rate{};   // one source's share, per second
    Amounts source_burst{};  // one source's share bucket size
    Amounts quiet_rate{};    // what a source may ask for and still be quiet, per second
    Amounts quiet_burst{};   // its bucket size
    double reserve = 0.25;   // of `burst`, open to quiet sources only
    std::size_t max_sources = 4096;
  };

  enum class Verdict {
    kAdmit,          // taken from the buckets
    kSourceLimited,  // this source used up its share
    kRateLimited,    // the overall budget is used up (for this source: down to the reserve)
  };

  SourceLimiter(const Limits& limits, Clock::time_point now);

  /// `quiet`, when given, is set to whether the source was quiet (the reserve open to it):
  /// a caller with a bounded queue behind the budget can keep a place there for quiet sources.
  Verdict Admit(const boost::asio::ip::address& source, const Amounts& cost, Clock::time_point now,
                bool* quiet = nullptr);

  /// Seconds until `source` could be admitted for `cost` as far as its own share is concerned
  /// (0 when it could now): what Retry-After should say to a source that was kSourceLimited.
  double SourceWait(const boost::asio::ip::address& source, const Amounts& cost,
                    Clock::time_point now);

  /// Sources remembered now (for tests: bounded by max_sources).
  std::size_t sources() const { return sources_.size(); }

 private:
  struct Bucket {
    Amounts tokens;
    Clock::time_point last;
  };
  struct Source {
    Bucket share;
    Bucket quiet;
  };

  static void Refill(Bucket& b, const Amounts& rate, const Amounts& burst, Clock::time_point now);
  static bool Holds(const Bucket& b, const Amounts& cost, const Amounts& floor = {});
  static void Take(Bucket& b, const Amounts& cost);
  Source* Find(const boost::asio::ip::address& source, Clock::time_point now);
  void ForgetIdle(Clock::time_point now);

  Limits limits_;
  Amounts floor_{};                   // the reserve, in each dimension
  Clock::duration refilled_after_{};  // a source idle this long has full buckets again
  Bucket overall_;
  std::map<boost::asio::ip::address, Source> sources_;
  Clock::time_point last_sweep_;
};

extern template class SourceLimiter<1>;
extern template class SourceLimiter<2>;

}  // namespace podnet::net
