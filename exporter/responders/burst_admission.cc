#include "exporter/responders/burst_admission.h"

#include <algorithm>

#include "exporter/net/address.h"

namespace podnet::responders {

BurstAdmission::BurstAdmission(const BurstAdmissionLimits& limits) : limits_(limits) {
  limits_.slots = std::max(1, limits_.slots);
  limits_.max_sources = std::max(limits_.max_sources,
                                 static_cast<std::size_t>(limits_.slots) + limits_.max_waiting + 1);
}

bool BurstAdmission::Penalized(const Source& s, Clock::time_point now) const {
  return s.penalty_until && now < *s.penalty_until;
}

bool BurstAdmission::penalized(const Address& source, Clock::time_point now) const {
  auto it = sources_.find(net::Unmapped(source));
  return it != sources_.end() && Penalized(it->second, now);
}

BurstAdmission::Rank BurstAdmission::RankOf(const Source& s, Clock::time_point now) const {
  bool cooling = s.last_end && now - *s.last_end < limits_.cooldown;
  bool known = s.completed && now - *s.completed < limits_.memory;
  return {cooling, !known, s.waiting_since};
}

// Forgets what no longer matters (nothing held or awaited, no penalty, not known, not
// cooling); if that frees nothing, the source idle the longest that holds and awaits nothing.
void BurstAdmission::MakeRoom(Clock::time_point now) {
  auto idle = [&](const Source& s) { return s.held == 0 && !s.waiting; };
  std::erase_if(sources_, [&](const auto& kv) {
    const Source& s = kv.second;
    return idle(s) && !Penalized(s, now) && RankOf(s, now).unknown &&
           !(s.last_end && now - *s.last_end < limits_.cooldown);
  });
  if (sources_.size() < limits_.max_sources) return;
  auto oldest = sources_.end();
  for (auto it = sources_.begin(); it != sources_.end(); ++it) {
    if (idle(it->second) &&
        (oldest == sources_.end() || it->second.last_seen < oldest->second.last_seen)) {
      oldest = it;
    }
  }
  if (oldest != sources_.end()) sources_.erase(oldest);
}

BurstAdmission::Source& BurstAdmission::Entry(const Address& source, Clock::time_point now) {
  auto key = net::Unmapped(source);
  auto it = sources_.find(key);
  if (it == sources_.end()) {
    if (sources_.size() >= limits_.max_sources) MakeRoom(now);
    it = sources_.emplace(key, Source{}).first;
  }
  it->second.last_seen = now;
  return it->second;
}

BurstAdmission::Decision BurstAdmission::Ask(const Address& source, Clock::time_point now) {
  Source& s = Entry(source, now);
  if (held_ < limits_.slots && waiting_ == 0) {
    ++s.held;
    ++held_;
    return {Verdict::kAdmit, std::nullopt};
  }
  if (Penalized(s, now)) return {Verdict::kPenalty, std::nullopt};
  if (s.held > 0 || s.waiting) return {Verdict::kBusy, std::nullopt};
  s.waiting_since = now;
  std::optional<Address> bumped;
  if (waiting_ >= limits_.max_waiting) {
    auto worst = sources_.end();
    for (auto it = sources_.begin(); it != sources_.end(); ++it) {
      if (!it->second.waiting) continue;
      if (worst == sources_.end() || RankOf(worst->second, now) < RankOf(it->second, now)) {
        worst = it;
      }
    }
    if (worst == sources_.end() || !(RankOf(s, now) < RankOf(worst->second, now))) {
      return {Verdict::kBusy, std::nullopt};
    }
    worst->second.waiting = false;
    --waiting_;
    bumped = worst->first;
  }
  s.waiting = true;
  ++waiting_;
  return {Verdict::kWait, bumped};
}

void BurstAdmission::Withdraw(const Address& source) {
  auto it = sources_.find(net::Unmapped(source));
  if (it == sources_.end() || !it->second.waiting) return;
  it->second.waiting = false;
  --waiting_;
}

void BurstAdmission::Release(const Address& source, Outcome outcome, Clock::time_point now) {
  auto it = sources_.find(net::Unmapped(source));
  if (it == sources_.end() || it->second.held == 0) return;  // not ours (forgotten cannot be)
  Source& s = it->second;
  --s.held;
  --held_;
  s.last_end = now;
  s.last_seen = now;
  if (outcome == Outcome::kCompleted) s.completed = now;
  if (outcome == Outcome::kFailed) {
    s.penalty_until = now + limits_.penalty;
    s.completed.reset();
  }
}

std::optional<BurstAdmission::Address> BurstAdmission::Promote(Clock::time_point now) {
  if (held_ >= limits_.slots || waiting_ == 0) return std::nullopt;
  auto best = sources_.end();
  for (auto it = sources_.begin(); it != sources_.end(); ++it) {
    if (!it->second.waiting) continue;
    if (best == sources_.end() || RankOf(it->second, now) < RankOf(best->second, now)) best = it;
  }
  if (best == sources_.end()) return std::nullopt;
  best->second.waiting = false;
  --waiting_;
  ++best->second.held;
  ++held_;
  best->second.last_seen = now;
  return best->first;
}

std::optional<BurstAdmission::Address> BurstAdmission::Victim(Clock::time_point now) const {
  if (waiting_ == 0) return std::nullopt;  // waiting sources hold nothing (Ask's rule)
  std::optional<Address> doubled;
  for (const auto& [address, s] : sources_) {
    if (s.held == 0) continue;
    if (Penalized(s, now)) return address;
    if (s.held > 1 && !doubled) doubled = address;
  }
  return doubled;
}

}  // namespace podnet::responders
