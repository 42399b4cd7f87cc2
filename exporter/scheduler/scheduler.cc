#include "exporter/scheduler/scheduler.h"

#include <algorithm>

#include <boost/asio/steady_timer.hpp>

namespace podnet::scheduler {

struct Scheduler::Target {
  Target(Scheduler& owner, boost::asio::io_context& io) : owner(owner), timer(io) {}
  Scheduler& owner;  // outlives the target's handlers: it stops every target when it goes
  topology::Peer peer;
  std::shared_ptr<probes::PeerProbe> probe;
  prometheus::Counter* skipped = nullptr;  // of its kind; null when not exported
  prometheus::Histogram* start_delay = nullptr;
  boost::asio::steady_timer timer;
  config::Duration interval{};
  std::chrono::steady_clock::time_point next{};
  bool running = false;
  bool stopped = false;
};

SchedulerMetrics::SchedulerMetrics(prometheus::Registry& registry)
    : skipped_(prometheus::BuildCounter()
                   .Name("podnet_probe_rounds_skipped_total")
                   .Help("Probe rounds not run because the previous round towards the same peer "
                         "was still running when they were due.")
                   .Register(registry)),
      start_delay_(prometheus::BuildHistogram()
                       .Name("podnet_probe_round_start_delay_seconds")
                       .Help("How late probe rounds started against their schedule.")
                       .Register(registry)) {}

prometheus::Counter& SchedulerMetrics::skipped(const std::string& kind) {
  return skipped_.Add({{"probe", kind}});
}

prometheus::Histogram& SchedulerMetrics::start_delay(const std::string& kind) {
  // 50 us to 5 s, about x2.5 apart: a loop that is merely busy shows in the low buckets, a
  // blocked one in the high ones.
  static const prometheus::Histogram::BucketBoundaries kBounds = {
      50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3,
      500e-3, 1, 2.5, 5};
  return start_delay_.Add({{"probe", kind}}, kBounds);
}

Scheduler::Scheduler(boost::asio::io_context& io, SchedulerMetrics* metrics)
    : io_(io),
      metrics_(metrics),
      rng_(std::random_device{}()),
      epoch_(std::chrono::steady_clock::now()) {}

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
  auto t = std::make_shared<Target>(*this, io_);
  t->peer = peer;
  t->probe = probe ? std::move(probe) : state.kind->ForPeer(peer);
  t->interval = state.kind->interval();
  if (metrics_) {
    t->skipped = &metrics_->skipped(state.name);
    t->start_delay = &metrics_->start_delay(state.name);
  }
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
    if (t->start_delay) {
      auto late = std::chrono::steady_clock::now() - t->next;
      t->start_delay->Observe(std::max(0.0, std::chrono::duration<double>(late).count()));
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
      auto now = std::chrono::steady_clock::now();
      while (t->next <= now) {  // fell behind: skip, never burst to catch up
        t->next += t->interval;
        ++t->owner.skipped_rounds_;
        if (t->skipped) t->skipped->Increment();
      }
      t->owner.Arm(t);
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
