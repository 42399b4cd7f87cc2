#include "exporter/probes/rtt/train.h"

#include <algorithm>
#include <utility>

namespace podnet::probes::rtt {

namespace {
constexpr std::int64_t kMaxTxStampSkewNs = 1'000'000'000;
}

std::optional<RoundStats> Summarize(std::span<const double> rtt_seconds,
                                    std::vector<double>& scratch) {
  if (rtt_seconds.empty()) return std::nullopt;
  scratch.assign(rtt_seconds.begin(), rtt_seconds.end());
  // Linear time: nth_element puts the upper middle value in place with everything below it
  // before it; the lower middle (even count) is then the largest of that lower part.
  auto n = scratch.size();
  auto upper = scratch.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(scratch.begin(), upper, scratch.end());
  RoundStats s;
  s.min_seconds = *std::min_element(scratch.begin(), upper + 1);
  s.median_seconds = *upper;
  if (n % 2 == 0) s.median_seconds = (*std::max_element(scratch.begin(), upper) + *upper) / 2;
  return s;
}

Train::Train(int count) { Reset(count); }

void Train::Reset(int count) {
  slots_.assign(count > 0 ? static_cast<std::size_t>(count) : 0, Slot{});
  highest_answered_ = -1;
  closed_ = false;
  std::vector<double> rtts = std::move(result_.rtt_seconds);  // its capacity is kept
  rtts.clear();
  result_ = TrainResult{};
  result_.rtt_seconds = std::move(rtts);
}

void Train::OnSent(int index, std::int64_t tx_user_ns) {
  if (index < 0 || index >= count() || slots_[index].sent) return;
  slots_[index].sent = true;
  slots_[index].tx_user_ns = tx_user_ns;
  ++result_.sent;
}

void Train::OnTxTimestamp(int index, std::int64_t tx_kernel_ns) {
  if (index < 0 || index >= count()) return;
  Slot& s = slots_[index];
  // The stamp is taken in the driver after sendmsg began; anything else is a mismatched key.
  if (!s.sent || tx_kernel_ns < s.tx_user_ns || tx_kernel_ns - s.tx_user_ns > kMaxTxStampSkewNs) {
    return;
  }
  // The first stamp is the one that left our interface: a bridge's outgoing port stamps the same
  // skb (same OPT_ID key) again, 5-14 µs later, and would shorten the RTT by one bridge hop.
  if (s.tx_kernel_ns != 0) return;
  s.tx_kernel_ns = tx_kernel_ns;
}

Train::Reply Train::OnReply(int index, std::int64_t rx_ns) {
  if (index < 0 || index >= count() || !slots_[index].sent) return Reply::kNotSent;
  Slot& s = slots_[index];
  if (s.answered) {
    ++result_.duplicates;
    return Reply::kDuplicate;
  }
  s.answered = true;
  if (closed_) {
    ++result_.late;
    return Reply::kLate;
  }
  s.in_time = true;
  s.rx_ns = rx_ns;
  ++result_.received;
  if (index < highest_answered_) {
    ++result_.reordered;
    return Reply::kReordered;
  }
  highest_answered_ = index;
  return Reply::kFirst;
}

const TrainResult& Train::Close() {
  closed_ = true;
  result_.rtt_seconds.clear();
  result_.tx_kernel_stamped = 0;
  for (const Slot& s : slots_) {
    if (!s.in_time) continue;
    std::int64_t tx = s.tx_kernel_ns != 0 ? s.tx_kernel_ns : s.tx_user_ns;
    std::int64_t rtt = s.rx_ns - tx;
    if (rtt < 0) continue;
    result_.rtt_seconds.push_back(static_cast<double>(rtt) * 1e-9);
    if (s.tx_kernel_ns != 0) ++result_.tx_kernel_stamped;
  }
  result_.stats = Summarize(result_.rtt_seconds, scratch_);
  return result_;
}

}  // namespace podnet::probes::rtt
