#include "exporter/probes/burst/budget.h"

namespace podnet::probes::burst {

void ByteBudget::Expire(Clock::time_point now) {
  while (!entries_.empty() && entries_.front().at + window_ <= now) {
    used_ -= entries_.front().bytes;
    entries_.pop_front();
  }
}

std::uint64_t ByteBudget::Used(Clock::time_point now) {
  Expire(now);
  return used_;
}

std::uint64_t ByteBudget::Remaining(Clock::time_point now) {
  Expire(now);
  return used_ >= limit_ ? 0 : limit_ - used_;
}

void ByteBudget::Charge(Clock::time_point at, std::uint64_t bytes) {
  if (bytes == 0) return;
  entries_.push_back({at, bytes});
  used_ += bytes;
}

}  // namespace podnet::probes::burst
