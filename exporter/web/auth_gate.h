#pragma once

// What the HTTP port does with the Authorization header of a request that needs basic auth,
// so that no number of clients sending wrong passwords can starve the exporter: every bcrypt
// check is paid for from a budget, and a pair checked once is never checked again.

#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "exporter/net/source_limiter.h"
#include "exporter/web/basic_auth.h"

namespace podnet::web {

/// How much bcrypt work the HTTP port may do, and how much it remembers. A bcrypt check at
/// cost 10 takes 50–300 ms of one core (idle to busy 2-core machine), so the port begins at most
/// 2 checks a second (≤ 0.6 of a core, on a thread of its own), whatever the clients do.
struct AuthLimits {
  std::size_t max_verified = 256;  // good (user, password) pairs remembered
  std::size_t max_failed = 4096;   // wrong pairs remembered (each 32 bytes of SHA-256 + overhead)
  double checks_per_second = 2;    // bcrypt checks begun, all sources together
  double check_burst = 8;
  /// Half of check_burst is kept for quiet sources (net::SourceLimiter's reserve): those that
  /// asked for at most one check per quiet_seconds lately (two at once). A Prometheus server's
  /// first scrape with a new pair is checked at once however many sources flood, unless more
  /// than 2 × quiet_seconds sources (128) pace themselves to stay quiet.
  double quiet_seconds = 64;
  double source_checks_per_second = 0.5;  // one source address's share
  double source_check_burst = 4;          // a person trying a few passwords by hand gets answers
  std::size_t max_sources = 4096;
  std::size_t max_pending = 4;  // checks queued or running at once (the worker's queue)
  /// Further places for quiet sources' checks, which also go before the others: a new pair
  /// from a quiet source never waits behind a queue full of a flood's checks.
  std::size_t quiet_pending = 2;
};

/// The decision for one request; used on one loop (not thread-safe). Time is passed in.
///
/// In order: a pair verified before is allowed (a hash lookup); no header or one that is not
/// Basic is refused; a wrong pair seen before is refused (a hash lookup: a repeated wrong
/// password costs no bcrypt); otherwise a bcrypt check is needed, and it is paid for from the
/// source's share and the overall budget (net::SourceLimiter: 0.5 a second per source, 2 a
/// second in all, half a burst of 8 kept for quiet sources) and from max_pending. What finds no
/// budget is answered at once without hashing, as 429 (Verdict kSourceLimited / kRateLimited): the
/// pair was not checked, so neither "wrong" (401) nor "right" would be true; 429 with Retry-After
/// tells a real client with the right password to come back rather than that its password is
/// wrong, and tells a guesser nothing about the password. A pair answered 429 is not
/// remembered as wrong.
///
/// Timing: a known user and an unknown one take the same path (the unknown one is checked
/// against a dummy hash of the same cost, and remembered as wrong the same way), so neither
/// a first attempt (a bcrypt, or a 429) nor a repeated one (a lookup) tells which users exist.
class AuthGate {
 public:
  using Clock = std::chrono::steady_clock;

  enum class Verdict {
    kAllowed,        // verified before: serve it
    kMissing,        // no Authorization header: 401
    kMalformed,      // not "Basic base64(user:password)": 401
    kKnownWrong,     // checked before and wrong: 401, no bcrypt
    kSourceLimited,  // needs a check, this source used its share: 429
    kRateLimited,    // needs a check, the overall budget (or the queue) is used up: 429
    kCheck,          // run BasicAuth::Matches(password, hash) off the loop, then Checked()
  };

  struct Decision {
    Verdict verdict = Verdict::kMissing;
    /// kCheck: what to check, and the key to hand back to Checked().
    std::string password;
    std::string hash;
    std::string key;
    /// kCheck for a quiet source: queue it first, in one of the quiet_pending places.
    bool first = false;
    /// kSourceLimited / kRateLimited: seconds for Retry-After (whole, at least 1).
    int retry_after_seconds = 0;
  };

  AuthGate(BasicAuth auth, const AuthLimits& limits, Clock::time_point now);

  /// The decision for a request from `source` (its peer address) carrying `authorization`
  /// ("" when it had none) at `now`. kCheck takes one of max_pending until Checked().
  Decision Admit(std::string_view authorization, const boost::asio::ip::address& source,
                 Clock::time_point now);

  /// The outcome of a kCheck: `good` pairs are allowed from now on without bcrypt, wrong ones
  /// refused without bcrypt (each cache bounded, the oldest forgotten first).
  void Checked(const std::string& key, bool good);
  /// A kCheck that will not run after all (the worker refused it): frees its place.
  void Cancelled();

  const AuthLimits& limits() const { return limits_; }

  /// For tests: pairs remembered, checks pending, sources in the limiter's table.
  std::size_t verified() const { return verified_.size(); }
  std::size_t failed() const { return failed_.size(); }
  std::size_t pending() const { return pending_; }
  std::size_t sources() const { return limiter_.sources(); }

 private:
  // A set of keys that forgets its oldest beyond `max`.
  class BoundedSet {
   public:
    explicit BoundedSet(std::size_t max) : max_(max) {}
    bool contains(const std::string& k) const { return set_.count(k) != 0; }
    void insert(const std::string& k);
    std::size_t size() const { return set_.size(); }

   private:
    std::size_t max_;
    std::unordered_set<std::string> set_;
    std::deque<std::string> order_;
  };

  BasicAuth auth_;
  AuthLimits limits_;
  net::SourceLimiter<1> limiter_;
  BoundedSet verified_;
  BoundedSet failed_;
  std::size_t pending_ = 0;
};

}  // namespace podnet::web
