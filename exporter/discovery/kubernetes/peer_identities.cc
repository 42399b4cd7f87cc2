#include "exporter/discovery/kubernetes/peer_identities.h"

#include <algorithm>
#include <set>
#include <utility>

namespace podnet::discovery::kubernetes {

using boost::asio::ip::address;
using Clock = std::chrono::steady_clock;

std::size_t PeerIdentities::Answered(const std::vector<address>& addresses, TimePoint now) {
  std::set<address> seen;
  std::size_t left_out = 0;
  for (const address& a : addresses) {
    if (!seen.insert(a).second) continue;
    auto it = entries_.find(a);
    if (it == entries_.end()) {
      if (entries_.size() >= options_.max_addresses) {
        ++left_out;
        continue;
      }
      entries_[a].due = now;
      continue;
    }
    Entry& e = it->second;
    if (e.absent_since) {
      // Back after missing from an answer: perhaps another Pod with the same IP now.
      e.absent_since.reset();
      if (!e.deadline) e.due = now;
    }
  }
  // An answer with records is the Service's ready Pods: one missing from it went unready or
  // away (the watch drops it at once too). An answer with none, during a rollout, is more likely
  // a moment with no Pod ready than a fleet gone: the last ones stay for the grace.
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& e = it->second;
    if (!seen.count(it->first)) {
      if (!e.absent_since) e.absent_since = now;
      if (!addresses.empty() || now - *e.absent_since >= options_.absent_grace) {
        it = entries_.erase(it);
        continue;
      }
    }
    ++it;
  }
  return left_out;
}

std::vector<address> PeerIdentities::Due(TimePoint now, std::size_t max) {
  std::vector<std::pair<TimePoint, address>> due;
  for (const auto& [a, e] : entries_) {
    if (!e.deadline && !e.absent_since && e.due <= now) due.emplace_back(e.due, a);
  }
  std::size_t n = std::min(max, due.size());
  std::partial_sort(due.begin(), due.begin() + static_cast<long>(n), due.end());
  std::vector<address> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    entries_[due[i].second].deadline = now + options_.ask_timeout;
    out.push_back(due[i].second);
  }
  return out;
}

PeerIdentities::HeardResult PeerIdentities::Heard(const address& a, const Endpoint& identity,
                                                  TimePoint now) {
  auto it = entries_.find(a);
  if (it == entries_.end() || !it->second.deadline) return HeardResult::kIgnored;
  Entry& e = it->second;
  e.deadline.reset();
  e.settled = true;
  if (identity.zone.empty()) {
    RetrySoon(e, now);  // a Pod answers before its own Node GET told it its zone
  } else {
    e.tries = 0;
    e.due = now + options_.reask;
  }
  if (e.identity == identity) return HeardResult::kSame;
  e.identity = identity;
  return HeardResult::kChanged;
}

bool PeerIdentities::Lost(const address& a, TimePoint now) {
  auto it = entries_.find(a);
  if (it == entries_.end() || !it->second.deadline) return false;
  Entry& e = it->second;
  e.deadline.reset();
  e.settled = true;
  RetrySoon(e, now);
  return true;
}

void PeerIdentities::RetrySoon(Entry& e, TimePoint now) const {
  auto wait = options_.ask_timeout * (1LL << std::min(e.tries, 20));
  e.due = now + std::min<Clock::duration>(wait, options_.reask);
  ++e.tries;
}

std::size_t PeerIdentities::Expire(TimePoint now) {
  std::vector<address> late;
  for (const auto& [a, e] : entries_) {
    if (e.deadline && *e.deadline <= now) late.push_back(a);
  }
  for (const address& a : late) Lost(a, now);
  return late.size();
}

std::vector<Endpoint> PeerIdentities::Endpoints() const {
  std::vector<Endpoint> out;
  for (const auto& [a, e] : entries_) {
    if (e.identity) out.push_back(*e.identity);
  }
  return out;
}

void PeerIdentities::Seed(const std::vector<Endpoint>& known, TimePoint now) {
  for (const Endpoint& e : known) {
    if (entries_.size() >= options_.max_addresses) return;
    auto [it, added] = entries_.try_emplace(e.address);
    if (!added) continue;
    it->second.identity = e;
    it->second.settled = true;
    it->second.due = now + options_.reask;
  }
}

bool PeerIdentities::AllAskedOnce() const {
  return std::all_of(entries_.begin(), entries_.end(),
                     [](const auto& kv) { return kv.second.settled || kv.second.absent_since; });
}

std::size_t PeerIdentities::NodeConflicts() const {
  std::map<std::string_view, int> claims;
  for (const auto& [a, e] : entries_) {
    if (e.identity && !e.identity->node.empty()) ++claims[e.identity->node];
  }
  return static_cast<std::size_t>(
      std::count_if(claims.begin(), claims.end(), [](const auto& kv) { return kv.second > 1; }));
}

std::optional<PeerIdentities::TimePoint> PeerIdentities::NextDue() const {
  std::optional<TimePoint> next;
  for (const auto& [a, e] : entries_) {
    TimePoint t = e.deadline ? *e.deadline : e.due;
    if (!next || t < *next) next = t;
  }
  return next;
}

}  // namespace podnet::discovery::kubernetes
