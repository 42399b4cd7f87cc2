#pragma once

// BasicScheduler's definitions, for the translation units that instantiate it: scheduler.cc
// (std::chrono::steady_clock, the exporter's) and tests (a clock they move by hand).

#include <algorithm>
#include <boost/asio/basic_waitable_timer.hpp>

#include "exporter/scheduler/scheduler.h"

namespace podnet::scheduler {

template <typename Clock>
struct BasicScheduler<Clock>::Target {
  Target(BasicScheduler& owner, boost::asio::io_context& io) : owner(owner), timer(io) {}
  BasicScheduler& owner;  // outlives the target's handlers: it stops every target when it goes
  topology::Peer peer;
  std::shared_ptr<probes::PeerProbe> probe;
  prometheus::Counter* skipped = nullptr;  // of its kind; null when not exported
  metrics::HistogramSeries start_delay;
  boost::asio::basic_waitable_timer<Clock> timer;
  config::Duration interval{};
  std::chrono::steady_clock::time_point next{};
  bool running = false;
  bool stopped = false;
};

template <typename Clock>
BasicScheduler<Clock>::BasicScheduler(boost::asio::io_context& io, SchedulerMetrics* metrics)
    : io_(io), metrics_(metrics), rng_(std::random_device{}()), epoch_(Clock::now()) {}

template <typename Clock>
BasicScheduler<Clock>::~BasicScheduler() {
  StopAll();
}

template <typename Clock>
void BasicScheduler<Clock>::SetKind(std::string_view name, std::shared_ptr<probes::ProbeKind> kind,
                                    const std::vector<topology::Peer>& peers) {
  auto it = kinds_.find(name);
  if (it != kinds_.end()) {
    for (auto& [peer, t] : it->second.targets) Stop(*t, /*remove_series=*/true);
    kinds_.erase(it);
  }
  if (!kind) return;
  KindState& state = kinds_[std::string(name)];
  state.kind = std::move(kind);
  state.name = std::string(name);
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

template <typename Clock>
void BasicScheduler<Clock>::UpdatePeers(const topology::PeerDiff& diff) {
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

template <typename Clock>
void BasicScheduler<Clock>::StopAll() {
  for (auto& [name, state] : kinds_) {
    for (auto& [peer, t] : state.targets) Stop(*t, /*remove_series=*/false);
  }
  kinds_.clear();
}

template <typename Clock>
std::size_t BasicScheduler<Clock>::size() const {
  std::size_t n = 0;
  for (const auto& [name, state] : kinds_) n += state.targets.size();
  return n;
}

template <typename Clock>
void BasicScheduler<Clock>::Start(KindState& state, const topology::Peer& peer,
                                  std::shared_ptr<probes::PeerProbe> probe) {
  auto t = std::make_shared<Target>(*this, io_);
  t->peer = peer;
  t->probe = probe ? std::move(probe) : state.kind->ForPeer(peer);
  t->interval = state.kind->interval();
  if (metrics_) {
    t->skipped = &metrics_->skipped(state.name);
    t->start_delay = metrics_->start_delay(state.name);
  }
  // A random slot of the grid within one interval from now, counted from the epoch so that
  // targets started at different times still share slots.
  auto now = Clock::now();
  std::int64_t slots = std::max<std::int64_t>(1, t->interval / kPhaseGrid);
  std::uniform_int_distribution<std::int64_t> slot(1, slots);
  auto elapsed_slots = (now - epoch_) / kPhaseGrid;
  t->next = epoch_ + kPhaseGrid * (elapsed_slots + slot(rng_));
  state.targets[peer.name] = t;
  Arm(t);
}

template <typename Clock>
void BasicScheduler<Clock>::Arm(const std::shared_ptr<Target>& t) {
  t->timer.expires_at(t->next);
  t->timer.async_wait([weak = std::weak_ptr<Target>(t)](boost::system::error_code ec) {
    auto t = weak.lock();
    if (ec || !t || t->stopped) return;
    if (t->start_delay) {
      auto late = Clock::now() - t->next;
      t->start_delay.Observe(std::max(0.0, std::chrono::duration<double>(late).count()));
    }
    t->running = true;
    // Only the weak pointer is captured: at 16 bytes the std::function holds it in place, so a
    // round allocates nothing here.
    t->probe->Run(t->next, [weak] {
      auto t = weak.lock();
      if (!t) return;
      t->running = false;
      if (t->stopped) return;
      t->next += t->interval;
      auto now = Clock::now();
      while (t->next <= now) {  // fell behind: skip, never burst to catch up
        t->next += t->interval;
        ++t->owner.skipped_rounds_;
        if (t->skipped) t->skipped->Increment();
      }
      t->owner.Arm(t);
    });
  });
}

template <typename Clock>
void BasicScheduler<Clock>::Stop(Target& t, bool remove_series) {
  t.stopped = true;
  t.timer.cancel();
  t.probe->Cancel();
  if (remove_series) t.probe->RemoveSeries();
}

}  // namespace podnet::scheduler
