#include "exporter/responders/connection_slots.h"

#include <algorithm>

#include "exporter/net/address.h"

namespace podnet::responders {

const char* ConnectionSlots::ReasonName(Reason r) {
  switch (r) {
    case Reason::kSourceConnectionLimit:
      return "source_connection_limit";
    case Reason::kConnectionLimit:
      return "connection_limit";
    case Reason::kInputBudget:
      return "input_budget";
    case Reason::kEvicted:
      return "evicted";
    case Reason::kIdleTimeout:
      return "idle_timeout";
  }
  return "unknown";
}

ConnectionSlots::ConnectionSlots(const SlotLimits& limits) : limits_(limits) {
  // Every source that holds a slot has a record: there must be room for all of them.
  limits_.max_sources =
      std::max(limits_.max_sources, static_cast<std::size_t>(limits_.max_connections) + 1);
}

ConnectionSlots::Admission ConnectionSlots::Admit(const Address& source, Time now) {
  const Address key = net::Unmapped(source);
  int held = 0;
  bool cooling = false;
  if (auto it = sources_.find(key); it != sources_.end()) {
    Source& s = it->second;
    Refill(s, now);
    if (s.blocked) {
      if (s.tokens < limits_.input_burst_bytes) return {false, Reason::kInputBudget, {}};
      s.blocked = false;
    }
    held = s.connections;
    cooling = now < s.cooldown_until;
  }
  if (held >= limits_.max_connections_per_source) {
    return {false, Reason::kSourceConnectionLimit, {}};
  }
  if (connections() < limits_.max_connections) return {true, {}, {}};
  std::optional<Id> victim = Victim(key);
  if (!victim) return {false, Reason::kConnectionLimit, {}};
  auto it = connections_.find(*victim);
  const int victim_held = sources_.at(it->second.source).connections;
  const double fair = static_cast<double>(limits_.max_connections) / (holding_ + (held == 0));
  if (held + 1 > victim_held || (cooling && held + 1 > fair)) {
    return {false, Reason::kConnectionLimit, {}};
  }
  Forget(it, now, /*cool_down=*/true);
  return {true, {}, victim};
}

void ConnectionSlots::Add(Id id, const Address& source, Time now) {
  const Address key = net::Unmapped(source);
  Source& s = SourceOf(key, now);
  if (s.connections++ == 0) ++holding_;
  connections_[id] = Connection{key, now, 0};
}

std::vector<ConnectionSlots::Id> ConnectionSlots::Received(Id id, std::uint64_t bytes_received,
                                                           Time now) {
  auto it = connections_.find(id);
  if (it == connections_.end() || bytes_received <= it->second.bytes) return {};
  const double delta = static_cast<double>(bytes_received - it->second.bytes);
  it->second.bytes = bytes_received;
  it->second.last_input = now;
  const Address source = it->second.source;
  Source& s = sources_.at(source);
  Refill(s, now);
  s.tokens -= delta;
  if (s.tokens >= 0) return {};
  s.blocked = true;
  std::vector<Id> closed;
  for (auto c = connections_.begin(); c != connections_.end();) {
    auto next = std::next(c);
    if (c->second.source == source) {
      closed.push_back(c->first);
      Forget(c, now, /*cool_down=*/false);
    }
    c = next;
  }
  return closed;
}

void ConnectionSlots::Answered(Id id, Time now) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Source& s = sources_.at(it->second.source);
  Refill(s, now);
  s.tokens = std::min(limits_.input_burst_bytes + limits_.input_credit_headroom_bytes,
                      s.tokens + limits_.input_credit_per_answer);
}

std::vector<ConnectionSlots::Id> ConnectionSlots::Idle(Time now) {
  std::vector<Id> closed;
  for (auto c = connections_.begin(); c != connections_.end();) {
    auto next = std::next(c);
    if (now - c->second.last_input >= limits_.idle_timeout) {
      closed.push_back(c->first);
      Forget(c, now, /*cool_down=*/true);
    }
    c = next;
  }
  return closed;
}

void ConnectionSlots::Remove(Id id, Time now, bool cool_down) {
  if (auto it = connections_.find(id); it != connections_.end()) Forget(it, now, cool_down);
}

int ConnectionSlots::ConnectionsOf(const Address& source) const {
  auto it = sources_.find(net::Unmapped(source));
  return it == sources_.end() ? 0 : it->second.connections;
}

ConnectionSlots::Source& ConnectionSlots::SourceOf(const Address& source, Time now) {
  if (auto it = sources_.find(source); it != sources_.end()) return it->second;
  if (sources_.size() >= limits_.max_sources) ForgetIdleSources(now);
  return sources_.emplace(source, Source{0, limits_.input_burst_bytes, now, Time{}, false})
      .first->second;
}

void ConnectionSlots::Refill(Source& s, Time now) const {
  if (now <= s.refilled) return;
  const double elapsed = std::chrono::duration<double>(now - s.refilled).count();
  s.refilled = now;
  if (s.tokens >= limits_.input_burst_bytes) return;  // full, or over by credits: kept
  s.tokens =
      std::min(limits_.input_burst_bytes, s.tokens + elapsed * limits_.input_bytes_per_second);
}

void ConnectionSlots::Forget(std::map<Id, Connection>::iterator it, Time now, bool cool_down) {
  Source& s = sources_.at(it->second.source);
  if (--s.connections == 0) --holding_;
  if (cool_down) s.cooldown_until = now + limits_.cooldown;
  connections_.erase(it);
}

std::optional<ConnectionSlots::Id> ConnectionSlots::Victim(const Address& newcomer) const {
  // The most connections any other source holds, then the connection idle the longest among
  // the sources holding that many (the lowest Id when equally idle).
  int most = 0;
  for (const auto& [address, s] : sources_) {
    if (address != newcomer) most = std::max(most, s.connections);
  }
  if (most == 0) return std::nullopt;
  std::optional<Id> victim;
  Time idlest = Time::max();
  for (const auto& [id, c] : connections_) {
    if (c.source != newcomer && sources_.at(c.source).connections == most &&
        c.last_input < idlest) {
      idlest = c.last_input;
      victim = id;
    }
  }
  return victim;
}

void ConnectionSlots::ForgetIdleSources(Time now) {
  // First those with nothing left to remember (a full budget, no cooldown), then, if the map
  // is still full, any that holds no slot.
  for (auto it = sources_.begin(); it != sources_.end();) {
    Source& s = it->second;
    Refill(s, now);
    const bool empty =
        s.connections == 0 && s.tokens >= limits_.input_burst_bytes && now >= s.cooldown_until;
    it = empty ? sources_.erase(it) : std::next(it);
  }
  for (auto it = sources_.begin();
       it != sources_.end() && sources_.size() >= limits_.max_sources;) {
    it = it->second.connections == 0 ? sources_.erase(it) : std::next(it);
  }
}

}  // namespace podnet::responders
