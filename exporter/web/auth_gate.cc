#include "exporter/web/auth_gate.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace podnet::web {
namespace {

net::SourceLimiter<1>::Limits Buckets(const AuthLimits& l) {
  net::SourceLimiter<1>::Limits b;
  b.rate = {l.checks_per_second};
  b.burst = {l.check_burst};
  b.source_rate = {l.source_checks_per_second};
  b.source_burst = {l.source_check_burst};
  b.quiet_rate = {1.0 / l.quiet_seconds};
  b.quiet_burst = {2.0};
  b.reserve = 0.5;
  b.max_sources = l.max_sources;
  return b;
}

}  // namespace

void AuthGate::BoundedSet::insert(const std::string& k) {
  if (!set_.insert(k).second) return;
  order_.push_back(k);
  if (order_.size() > max_) {
    set_.erase(order_.front());
    order_.pop_front();
  }
}

AuthGate::AuthGate(BasicAuth auth, const AuthLimits& limits, Clock::time_point now)
    : auth_(std::move(auth)),
      limits_(limits),
      limiter_(Buckets(limits), now),
      verified_(limits.max_verified),
      failed_(limits.max_failed) {}

AuthGate::Decision AuthGate::Admit(std::string_view authorization,
                                   const boost::asio::ip::address& source, Clock::time_point now) {
  Decision d;
  if (authorization.empty()) return d;  // kMissing
  auto c = DecodeBasic(authorization);
  if (!c) {
    d.verdict = Verdict::kMalformed;
    return d;
  }
  d.key = auth_.Key(*c);
  if (verified_.contains(d.key)) {
    d.verdict = Verdict::kAllowed;
    return d;
  }
  if (failed_.contains(d.key)) {
    d.verdict = Verdict::kKnownWrong;
    return d;
  }
  if (pending_ >= limits_.max_pending + limits_.quiet_pending) {
    d.verdict = Verdict::kRateLimited;
    d.retry_after_seconds = 1;
    return d;
  }
  bool quiet = false;
  switch (limiter_.Admit(source, {1.0}, now, &quiet)) {
    case net::SourceLimiter<1>::Verdict::kAdmit:
      if (pending_ >= limits_.max_pending + (quiet ? limits_.quiet_pending : 0)) break;
      ++pending_;
      d.verdict = Verdict::kCheck;
      d.password = std::move(c->password);
      d.hash = auth_.HashFor(*c);
      d.first = quiet;
      return d;
    case net::SourceLimiter<1>::Verdict::kSourceLimited:
      d.verdict = Verdict::kSourceLimited;
      d.retry_after_seconds =
          std::max(1, static_cast<int>(std::ceil(limiter_.SourceWait(source, {1.0}, now))));
      return d;
    case net::SourceLimiter<1>::Verdict::kRateLimited:
      break;
  }
  d.verdict = Verdict::kRateLimited;
  d.retry_after_seconds = 1;
  return d;
}

void AuthGate::Checked(const std::string& key, bool good) {
  Cancelled();
  (good ? verified_ : failed_).insert(key);
}

void AuthGate::Cancelled() {
  if (pending_ > 0) --pending_;
}

}  // namespace podnet::web
