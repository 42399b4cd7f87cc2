#include "exporter/responders/echo_limiter.h"

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

EchoLimiter::Verdict Of(net::SourceLimiter<2>::Verdict v) {
  switch (v) {
    case net::SourceLimiter<2>::Verdict::kAdmit:
      return EchoLimiter::Verdict::kAnswer;
    case net::SourceLimiter<2>::Verdict::kSourceLimited:
      return EchoLimiter::Verdict::kSourceLimited;
    case net::SourceLimiter<2>::Verdict::kRateLimited:
      break;
  }
  return EchoLimiter::Verdict::kRateLimited;
}

}  // namespace

EchoLimiter::EchoLimiter(const EchoLimits& limits, Clock::time_point now)
    : limits_(limits), limiter_(Buckets(limits), now) {}

EchoLimiter::Verdict EchoLimiter::Admit(const boost::asio::ip::address& source, std::size_t bytes,
                                        Clock::time_point now) {
  if (bytes > limits_.max_reply_bytes) return Verdict::kTooLarge;
  return Of(limiter_.Admit(source, {1.0, static_cast<double>(bytes)}, now));
}

}  // namespace podnet::responders
