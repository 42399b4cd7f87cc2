#include "exporter/scheduler/scheduler.h"

#include <algorithm>

#include <boost/asio/steady_timer.hpp>

namespace podnet::scheduler {

struct Scheduler::Target {
  explicit Target(boost::asio::io_context& io) : timer(io) {}
  topology::Peer peer;
  std::shared_ptr<probes::PeerProbe> probe;
  boost::asio::steady_timer timer;
  config::Duration interval{};
  std::chrono::steady_clock::time_point next{};
  bool running = false;
  bool stopped = false;
};

Scheduler::Scheduler(boost::asio::io_context& io)
    : io_(io), rng_(std::random_device{}()), epoch_(std::chrono::steady_clock::now()) {}

Scheduler::~Scheduler() { StopAll(); }

void Scheduler::SetKind(std::string_view name, std::shared_ptr<probes::ProbeKind> kind,
                        const std::vector<topology::Peer>& peers) {
  auto it = kinds_.find(name);
  if (it != kinds_.end()) {
    for (auto& [peer, t] : it->second.targets) Stop(*t, /*remove_series=*/true);
    kinds_.erase(it);
  }
  if (!kind) return;
  KindState& state = kinds_[std::string(name)];
  state.kind = std::move(kind);
  if (auto keys = state.kind->Targets(); !keys.empty()) {
    state.fixed_targets = true;
    for (const auto& key : keys) {
      topology::Peer target;
      target.name = key;
      Start(state, target, state.kind->ForTarget(key));
    }
    return;
  }
  for (const auto& p : peers) Start(state, p);
}

void Scheduler::UpdatePeers(const topology::PeerDiff& diff) {
  for (auto& [name, state] : kinds_) {
    if (state.fixed_targets) continue;
    // Removed first: a changed peer is removed and added under the same name and labels may
    // overlap, so its old series must be gone before the new probe creates them again.
    for (const auto& p : diff.removed) {
      auto t = state.targets.find(p.name);
      if (t == state.targets.end()) continue;
      Stop(*t->second, /*remove_series=*/true);
      state.targets.erase(t);
    }
    for (const auto& p : diff.added) Start(state, p);
  }
}

void Scheduler::StopAll() {
  for (auto& [name, state] : kinds_) {
    for (auto& [peer, t] : state.targets) Stop(*t, /*remove_series=*/false);
  }
  kinds_.clear();
}

std::size_t Scheduler::size() const {
  std::size_t n = 0;
  for (const auto& [name, state] : kinds_) n += state.targets.size();
  return n;
}

void Scheduler::Start(KindState& state, const topology::Peer& peer,
                      std::shared_ptr<probes::PeerProbe> probe) {
  auto t = std::make_shared<Target>(io_);
  t->peer = peer;
  t->probe = probe ? std::move(probe) : state.kind->ForPeer(peer);
  t->interval = state.kind->interval();
  // A random slot of the grid within one interval from now, counted from the epoch so that
  // targets started at different times still share slots.
  auto now = std::chrono::steady_clock::now();
  std::int64_t slots = std::max<std::int64_t>(1, t->interval / kPhaseGrid);
  std::uniform_int_distribution<std::int64_t> slot(1, slots);
  auto elapsed_slots = (now - epoch_) / kPhaseGrid;
  t->next = epoch_ + kPhaseGrid * (elapsed_slots + slot(rng_));
  state.targets[peer.name] = t;
  Arm(t);
}

void Scheduler::Arm(const std::shared_ptr<Target>& t) {
  t->timer.expires_at(t->next);
  t->timer.async_wait([this, weak = std::weak_ptr<Target>(t)](boost::system::error_code ec) {
    auto t = weak.lock();
    if (ec || !t || t->stopped) return;
    t->running = true;
    t->probe->Run(t->next, [this, weak] {
      auto t = weak.lock();
      if (!t) return;
      t->running = false;
      if (t->stopped) return;
      t->next += t->interval;
      auto now = std::chrono::steady_clock::now();
      while (t->next <= now) {  // fell behind: skip, never burst to catch up
        t->next += t->interval;
        ++skipped_rounds_;
      }
      Arm(t);
    });
  });
}

void Scheduler::Stop(Target& t, bool remove_series) {
  t.stopped = true;
  t.timer.cancel();
  t.probe->Cancel();
  if (remove_series) t.probe->RemoveSeries();
}

}  // namespace podnet::scheduler
