#include "exporter/probes/mtu/search.h"

#include <algorithm>

namespace podnet::probes::mtu {

Search::Search(int min, int max, int max_datagrams, int hint, int floor)
    : min_(min),
      max_(std::max(min, max)),
      budget_(max_datagrams),
      hint_(hint),
      floor_(floor > 0 ? std::min(floor, min) : min) {}

int Search::Bad(bool* confirmed) const {
  int bad = max_ + 1;
  bool sure = true;
  for (const std::set<int>* set : {&refused_, &silent_, &once_}) {
    auto it = set->upper_bound(ok_);
    if (it != set->end() && *it < bad) {
      bad = *it;
      sure = set != &once_;
    } else if (it != set->end() && *it == bad && set != &once_) {
      sure = true;
    }
  }
  if (confirmed != nullptr) *confirmed = sure;
  return bad;
}

bool Search::exact() const {
  bool confirmed = false;
  int bad = Bad(&confirmed);
  return bad - ok_ <= 1 && confirmed && ok_ > 0;
}

std::optional<int> Search::Next() const {
  if (sent_ >= budget_) return std::nullopt;
  if (sent_ == 0) return max_;
  bool confirmed = false;
  int bad = Bad(&confirmed);
  auto dead = [&](int s) { return silent_.count(s) != 0 || refused_.count(s) != 0; };
  if (ok_ == 0 && dead(min_) && dead(floor_)) return std::nullopt;  // nothing crosses
  // The upper bound, min and the floor are sent again at once when lost.
  for (int s : {max_, min_, floor_}) {
    if (s > ok_ && once_.count(s) != 0) return s;
  }
  auto open = [&](int s) { return s > ok_ && s < bad && s >= floor_ && s <= max_; };
  if (try_named_ != 0 && open(try_named_)) return try_named_;
  if (hint_ != 0) {
    if (open(hint_)) return hint_;
    if (ok_ == hint_ && open(hint_ + 1)) return hint_ + 1;
  }
  if (ok_ == 0) {
    for (int s : {min_, floor_}) {
      if (open(s)) return s;
    }
    return std::nullopt;
  }
  if (bad - ok_ <= 1) {
    if (confirmed) return std::nullopt;  // found
    return bad;                          // the boundary, lost once: once more
  }
  return ok_ + (bad - ok_) / 2;
}

void Search::Answered(int size) {
  ok_ = std::max(ok_, size);
  once_.erase(size);
  silent_.erase(size);  // a late reply: it did cross
  if (try_named_ == size) try_named_ = 0;
}

void Search::Lost(int size) {
  if (size <= ok_) return;  // a smaller or equal size already crossed: this loss is noise
  if (once_.erase(size) != 0) {
    silent_.insert(size);
  } else if (silent_.count(size) == 0) {
    once_.insert(size);
  }
  if (try_named_ == size && silent_.count(size) != 0) try_named_ = 0;
}

void Search::TooBig(int size, int mtu) {
  once_.erase(size);
  if (try_named_ == size) try_named_ = 0;
  if (size > ok_) refused_.insert(size);
  if (mtu > 0 && mtu < size) {
    named_ = named_ == 0 ? mtu : std::min(named_, mtu);
    // The MTU of one hop: nothing larger crosses it; it may itself cross (or a later hop be
    // smaller still), so it is tried next. Below the protocol's smallest MTU, that one.
    int hop = std::max(mtu, floor_);
    if (hop < size) {
      if (hop + 1 > ok_) refused_.insert(hop + 1);
      try_named_ = hop;
    }
  }
}

bool Search::black_hole() const {
  if (ok_ == 0) return false;
  return silent_.upper_bound(ok_) != silent_.end();
}

}  // namespace podnet::probes::mtu
