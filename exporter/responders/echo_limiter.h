#pragma once

#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstddef>

#include "exporter/net/source_limiter.h"

namespace podnet::responders {

/// How much the UDP echo responder may answer. Rates are token buckets that hold one second's
/// worth (a burst of a whole second is allowed, then the rate).
struct EchoLimits {
  double replies_per_second = 20000;  // all sources together
  double bytes_per_second = 20e6;     // reply bytes (UDP payload), all sources together
  /// The most one source address may take of each rate: with 1/16, one flooding sender gets at
  /// most 1,250 replies/s and 1.25 MB/s, and the rest stays for every other prober.
  double source_share = 1.0 / 16;
  /// A quarter of each overall budget (a quarter second's worth) is kept for quiet sources:
  /// those that took at most `quiet_share` of each rate lately (1/64: 312 replies/s and
  /// 312 kB/s, bursts of a second's worth). Flooding sources stop at the reserve, so a prober
  /// with a train of requests is answered however many sources flood, as long as fewer than 64
  /// pace themselves just under quiet_share (net/source_limiter.h).
  double quiet_share = 1.0 / 64;
  double reserve = 0.25;
  /// Larger requests are not answered at all: probes.rtt.size is at most 9000 bytes, so this is
  /// every legitimate request, and no one can make us reflect 64 KiB datagrams.
  std::size_t max_reply_bytes = 9000;
  /// Sources remembered at once; beyond it, idle ones (full buckets: nothing to remember) are
  /// forgotten at most once a second, and a source that finds no room is held to the overall
  /// budget above the reserve.
  std::size_t max_sources = 4096;
};

/// The UDP echo responder's admission decision: per-source fairness and a byte budget on top
/// of an overall reply rate, with a reserve for quiet sources (net::SourceLimiter). Not
/// thread-safe (one per responder, used on its loop). Time is passed in, so that tests are
/// deterministic.
class EchoLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Verdict {
    kAnswer,         // send the reply (its cost is taken from both budgets)
    kTooLarge,       // larger than max_reply_bytes
    kSourceLimited,  // this source used up its share
    kRateLimited,    // the overall budget is used up (down to the reserve, for a busy source)
  };

  EchoLimiter(const EchoLimits& limits, Clock::time_point now);

  /// Whether to answer a request of `bytes` from `source` at `now` (monotonic, non-decreasing).
  Verdict Admit(const boost::asio::ip::address& source, std::size_t bytes, Clock::time_point now);

  /// Sources currently remembered (for tests: bounded by max_sources).
  std::size_t sources() const { return limiter_.sources(); }

 private:
  EchoLimits limits_;
  net::SourceLimiter<2> limiter_;  // (replies, bytes)
};

}  // namespace podnet::responders
