#include "exporter/probes/mtu/search.h"

#include <algorithm>

namespace podnet::probes::mtu {

Search::Search(int min, int max, int max_datagrams, int hint)
    : min_(min), max_(std::max(min, max)), budget_(max_datagrams), hint_(hint), bad_(max_ + 1) {}

std::optional<int> Search::Next() const {
  if (sent_ >= budget_ || exact() || bad_ <= min_) return std::nullopt;
  auto open = [&](int s) { return s > ok_ && s < bad_ && s >= min_ && s <= max_; };
  if (retry_ != 0 && open(retry_)) return retry_;
  if (sent_ == 0) return max_;
  if (try_named_ != 0 && open(try_named_)) return try_named_;
  if (hint_ != 0) {
    if (open(hint_)) return hint_;
    if (ok_ == hint_ && open(hint_ + 1)) return hint_ + 1;
  }
  if (ok_ == 0) return min_;
  return ok_ + (bad_ - ok_) / 2;
}

void Search::Answered(int size) {
  ok_ = std::max(ok_, size);
  if (bad_ <= size) bad_ = std::min(max_ + 1, size + 1);
  if (retry_ == size) retry_ = 0;
  if (try_named_ == size) try_named_ = 0;
  lost_once_.erase(size);
}

void Search::Lost(int size) {
  if (size <= ok_) return;  // a smaller or equal size already crossed: this loss is noise
  if (lost_once_.insert(size).second) {
    retry_ = size;
    return;
  }
  if (retry_ == size) retry_ = 0;
  if (try_named_ == size) try_named_ = 0;
  silent_.insert(size);
  bad_ = std::min(bad_, size);
}

void Search::TooBig(int size, int mtu) {
  if (retry_ == size) retry_ = 0;
  if (try_named_ == size) try_named_ = 0;
  bad_ = std::min(bad_, std::max(size, ok_ + 1));
  if (mtu > 0 && mtu < size) {
    named_ = named_ == 0 ? mtu : std::min(named_, mtu);
    // The MTU of one hop: nothing larger crosses it; it may itself cross (or a later hop be
    // smaller still), so it is tried next.
    bad_ = std::min(bad_, std::max(mtu + 1, ok_ + 1));
    try_named_ = mtu;
  }
}

bool Search::black_hole() const {
  if (ok_ == 0) return false;
  return std::any_of(silent_.begin(), silent_.end(), [&](int s) { return s > ok_; });
}

}  // namespace podnet::probes::mtu
