#include "exporter/responders/echo_limiter.h"

#include <algorithm>

namespace podnet::responders {
namespace {

// An IPv4 sender seen through an IPv6 socket (::ffff:a.b.c.d) is the same source as over IPv4.
boost::asio::ip::address Canonical(const boost::asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6());
  }
  return a;
}

}  // namespace

EchoLimiter::EchoLimiter(const EchoLimits& limits, Clock::time_point now)
    : limits_(limits),
      overall_{limits.replies_per_second, limits.bytes_per_second, now},
      last_sweep_(now) {}

bool EchoLimiter::Refill(Bucket& b, double reply_rate, double byte_rate, std::size_t bytes,
                         Clock::time_point now) {
  double elapsed = std::chrono::duration<double>(now - b.last).count();
  if (elapsed > 0) {
    b.replies = std::min(reply_rate, b.replies + elapsed * reply_rate);
    b.bytes = std::min(byte_rate, b.bytes + elapsed * byte_rate);
    b.last = now;
  }
  return b.replies >= 1 && b.bytes >= static_cast<double>(bytes);
}

void EchoLimiter::ForgetIdle(Clock::time_point now) {
  if (now - last_sweep_ < std::chrono::seconds(1)) return;
  last_sweep_ = now;
  // A source idle for a second has a full bucket again: forgetting it changes nothing.
  std::erase_if(sources_,
                [now](const auto& kv) { return now - kv.second.last >= std::chrono::seconds(1); });
}

EchoLimiter::Verdict EchoLimiter::Admit(const boost::asio::ip::address& source, std::size_t bytes,
                                        Clock::time_point now) {
  if (bytes > limits_.max_reply_bytes) return Verdict::kTooLarge;
  double source_replies = limits_.replies_per_second * limits_.source_share;
  double source_bytes = limits_.bytes_per_second * limits_.source_share;
  auto key = Canonical(source);
  auto it = sources_.find(key);
  if (it == sources_.end()) {
    if (sources_.size() >= limits_.max_sources) ForgetIdle(now);
    if (sources_.size() < limits_.max_sources) {
      it = sources_.emplace(key, Bucket{source_replies, source_bytes, now}).first;
    }
  }
  // The overall budget first: when the responder as a whole is saturated, that is the reason.
  if (!Refill(overall_, limits_.replies_per_second, limits_.bytes_per_second, bytes, now)) {
    return Verdict::kRateLimited;
  }
  if (it != sources_.end() && !Refill(it->second, source_replies, source_bytes, bytes, now)) {
    return Verdict::kSourceLimited;
  }
  overall_.replies -= 1;
  overall_.bytes -= static_cast<double>(bytes);
  if (it != sources_.end()) {
    it->second.replies -= 1;
    it->second.bytes -= static_cast<double>(bytes);
  }
  return Verdict::kAnswer;
}

}  // namespace podnet::responders
