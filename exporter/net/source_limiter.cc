#include "exporter/net/source_limiter.h"

#include <algorithm>
#include <cmath>

namespace podnet::net {

template <std::size_t N>
SourceLimiter<N>::SourceLimiter(const Limits& limits, Clock::time_point now)
    : limits_(limits), overall_{limits.burst, now}, last_sweep_(now) {
  double refill = 0;  // seconds until an emptied source bucket is full again
  for (std::size_t d = 0; d < N; ++d) {
    floor_[d] = limits.reserve * limits.burst[d];
    if (limits.source_rate[d] > 0) {
      refill = std::max(refill, limits.source_burst[d] / limits.source_rate[d]);
    }
    if (limits.quiet_rate[d] > 0) {
      refill = std::max(refill, limits.quiet_burst[d] / limits.quiet_rate[d]);
    }
  }
  refilled_after_ = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::max(refill, 1.0)));
}

template <std::size_t N>
void SourceLimiter<N>::Refill(Bucket& b, const Amounts& rate, const Amounts& burst,
                              Clock::time_point now) {
  double elapsed = std::chrono::duration<double>(now - b.last).count();
  if (elapsed <= 0) return;
  for (std::size_t d = 0; d < N; ++d) {
    b.tokens[d] = std::min(burst[d], b.tokens[d] + elapsed * rate[d]);
  }
  b.last = now;
}

template <std::size_t N>
bool SourceLimiter<N>::Holds(const Bucket& b, const Amounts& cost, const Amounts& floor) {
  for (std::size_t d = 0; d < N; ++d) {
    if (b.tokens[d] < cost[d] + floor[d]) return false;
  }
  return true;
}

template <std::size_t N>
void SourceLimiter<N>::Take(Bucket& b, const Amounts& cost) {
  for (std::size_t d = 0; d < N; ++d) b.tokens[d] -= cost[d];
}

template <std::size_t N>
void SourceLimiter<N>::ForgetIdle(Clock::time_point now) {
  if (now - last_sweep_ < std::chrono::seconds(1)) return;
  last_sweep_ = now;
  // A source idle this long has full buckets again: forgetting it changes nothing.
  std::erase_if(sources_, [&](const auto& kv) {
    return now - std::min(kv.second.share.last, kv.second.quiet.last) >= refilled_after_;
  });
}

template <std::size_t N>
typename SourceLimiter<N>::Source* SourceLimiter<N>::Find(const boost::asio::ip::address& source,
                                                          Clock::time_point now) {
  auto key = Unmapped(source);
  auto it = sources_.find(key);
  if (it == sources_.end()) {
    if (sources_.size() >= limits_.max_sources) ForgetIdle(now);
    if (sources_.size() >= limits_.max_sources) return nullptr;
    it = sources_.emplace(key, Source{{limits_.source_burst, now}, {limits_.quiet_burst, now}})
             .first;
  }
  Refill(it->second.share, limits_.source_rate, limits_.source_burst, now);
  Refill(it->second.quiet, limits_.quiet_rate, limits_.quiet_burst, now);
  return &it->second;
}

template <std::size_t N>
typename SourceLimiter<N>::Verdict SourceLimiter<N>::Admit(const boost::asio::ip::address& source,
                                                           const Amounts& cost,
                                                           Clock::time_point now, bool* was_quiet) {
  Source* s = Find(source, now);
  Refill(overall_, limits_.rate, limits_.burst, now);
  bool quiet = s && Holds(s->quiet, cost);
  if (was_quiet) *was_quiet = quiet;
  if (s) {  // every request counts against quietness, admitted or not
    for (std::size_t d = 0; d < N; ++d) {
      s->quiet.tokens[d] = std::max(0.0, s->quiet.tokens[d] - cost[d]);
    }
  }
  if (s && !Holds(s->share, cost)) return Verdict::kSourceLimited;
  if (!Holds(overall_, cost, quiet ? Amounts{} : floor_)) return Verdict::kRateLimited;
  Take(overall_, cost);
  if (s) Take(s->share, cost);
  return Verdict::kAdmit;
}

template <std::size_t N>
double SourceLimiter<N>::SourceWait(const boost::asio::ip::address& source, const Amounts& cost,
                                    Clock::time_point now) {
  Source* s = Find(source, now);
  if (!s) return 0;
  double wait = 0;
  for (std::size_t d = 0; d < N; ++d) {
    double missing = cost[d] - s->share.tokens[d];
    if (missing > 0 && limits_.source_rate[d] > 0) {
      wait = std::max(wait, missing / limits_.source_rate[d]);
    }
  }
  return wait;
}

template class SourceLimiter<1>;
template class SourceLimiter<2>;

}  // namespace podnet::net
