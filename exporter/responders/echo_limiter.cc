#include "exporter/responders/echo_limiter.h"

#include "exporter/proto/echo.h"

namespace podnet::responders {
namespace {

net::SourceLimiter<2>::Limits Buckets(const EchoLimits& l) {
  net::SourceLimiter<2>::Limits b;
  // Each bucket holds one second's worth: a burst of a whole second, then the rate.
  b.rate = b.burst = {l.replies_per_second, l.bytes_per_second};
  b.source_rate =
      b.source_burst = {l.replies_per_second * l.source_share, l.bytes_per_second * l.source_share};
  b.quiet_rate =
      b.quiet_burst = {l.replies_per_second * l.quiet_share, l.bytes_per_second * l.quiet_share};
  b.reserve = l.reserve;
  b.max_sources = l.max_sources;
  return b;
}

net::SourceLimiter<1>::Limits PaddedBuckets(const EchoLimits& l) {
  net::SourceLimiter<1>::Limits b;
  double rate = l.padded_replies_per_second;
  b.rate = b.burst = {rate};
  b.source_rate = b.source_burst = {rate * l.source_share};
  b.quiet_rate = b.quiet_burst = {rate * l.quiet_share};
  b.reserve = l.reserve;
  b.max_sources = l.max_sources;
  return b;
}

template <std::size_t N>
EchoLimiter::Verdict Of(typename net::SourceLimiter<N>::Verdict v) {
  switch (v) {
    case net::SourceLimiter<N>::Verdict::kAdmit:
      return EchoLimiter::Verdict::kAnswer;
    case net::SourceLimiter<N>::Verdict::kSourceLimited:
      return EchoLimiter::Verdict::kSourceLimited;
    case net::SourceLimiter<N>::Verdict::kRateLimited:
      break;
  }
  return EchoLimiter::Verdict::kRateLimited;
}

}  // namespace

EchoLimiter::EchoLimiter(const EchoLimits& limits, Clock::time_point now)
    : limits_(limits), limiter_(Buckets(limits), now), padded_(PaddedBuckets(limits), now) {}

EchoLimiter::Verdict EchoLimiter::AdmitPadded(const boost::asio::ip::address& source,
                                              std::size_t request_bytes, std::size_t reply_bytes,
                                              Clock::time_point now) {
  if (reply_bytes > limits_.max_reply_bytes ||
      reply_bytes > proto::echo::kMaxPadRatio * request_bytes) {
    return Verdict::kTooLarge;
  }
  if (auto v = Of<1>(padded_.Admit(source, {1.0}, now)); v != Verdict::kAnswer) return v;
  return Admit(source, reply_bytes, now);
}

EchoLimiter::Verdict EchoLimiter::Admit(const boost::asio::ip::address& source, std::size_t bytes,
                                        Clock::time_point now) {
  if (bytes > limits_.max_reply_bytes) return Verdict::kTooLarge;
  switch (limiter_.Admit(source, {1.0, static_cast<double>(bytes)}, now)) {
    case net::SourceLimiter<2>::Verdict::kAdmit:
      return Verdict::kAnswer;
    case net::SourceLimiter<2>::Verdict::kSourceLimited:
      return Verdict::kSourceLimited;
    case net::SourceLimiter<2>::Verdict::kRateLimited:
      break;
  }
  return Verdict::kRateLimited;
}

}  // namespace podnet::responders
