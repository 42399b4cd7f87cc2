#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "exporter/metrics/metrics.h"
#include "exporter/probes/phase_grid.h"
#include "exporter/probes/probe.h"
#include "exporter/topology/topology.h"

namespace podnet::scheduler {

/// Runs every probe kind towards every peer at the kind's interval, on the probe loop. Each
/// (kind, peer) pair starts at a random phase within its first interval, so that N peers do not
/// fire together, then runs at a fixed rate; a round still running when the next is due makes
/// the next one skipped (counted), never overlapped. Not thread-safe: call on the probe loop.
///
/// Phases are multiples of kPhaseGrid (20 ms) from one epoch, so rounds (and their timeouts,
/// which probes round up to the grid) that fall in the same grid slot share one wake-up of the
/// loop: at most 50 a second, however many peers. Accuracy is untouched: RTT comes from kernel
/// timestamps, not from when a send was scheduled.
using probes::kPhaseGrid;

/// The scheduler's own health, by probe kind (`probe` label: the kind's name, as
/// probes::ProbeKinds() lists them):
///  - podnet_probe_rounds_skipped_total{probe}: rounds not run because the previous round of
///    the same (kind, peer) was still running when they were due;
///  - podnet_probe_round_start_delay_seconds{probe}: how late each round started against its
///    schedule (the timer's wake-up lateness: a busy probe loop shows here first).
/// Series appear with the kind's first round.
class SchedulerMetrics {
 public:
  /// The families in `registry`; with `native` (the app's Metrics), start_delay's series get
  /// native buckets while its metrics.native_histograms is on.
  explicit SchedulerMetrics(prometheus::Registry& registry,
                            const metrics::Metrics* native = nullptr);
  prometheus::Counter& skipped(const std::string& kind);
  /// The kind's series, with native buckets when they are on at this call (a kind's targets are
  /// made again when the setting changes: every kind restarts), without (and any native ones of
  /// before dropped) when off.
  metrics::HistogramSeries start_delay(const std::string& kind);

 private:
  prometheus::Family<prometheus::Counter>& skipped_;
  prometheus::Family<prometheus::Histogram>& start_delay_;
  const metrics::Metrics* native_;
};

/// `Clock` is the time the scheduler lays rounds out on and waits by (its timers are
/// boost::asio::basic_waitable_timer<Clock>): std::chrono::steady_clock in the exporter (the
/// `Scheduler` below), a clock the test moves by hand in tests. Its time_point must be
/// steady_clock's, as probes::PeerProbe::Run takes one. The definitions are in
/// scheduler_impl.h; scheduler.cc instantiates the steady_clock one.
template <typename Clock>
class BasicScheduler {
 public:
  static_assert(std::is_same_v<typename Clock::time_point, std::chrono::steady_clock::time_point>,
                "probes take steady_clock time points");

  /// `metrics` (may be null: not exported) must outlive the scheduler.
  explicit BasicScheduler(boost::asio::io_context& io, SchedulerMetrics* metrics = nullptr);
  ~BasicScheduler();
  BasicScheduler(const BasicScheduler&) = delete;
  BasicScheduler& operator=(const BasicScheduler&) = delete;

  /// Replaces the probes of kind `name`: stops every running one and removes its series, then
  /// starts `kind` (nullptr = the kind is off) towards each of `peers`, or towards each of its
  /// own kind->Targets() when it has some (those kinds ignore peers and UpdatePeers).
  void SetKind(std::string_view name, std::shared_ptr<probes::ProbeKind> kind,
               const std::vector<topology::Peer>& peers);

  /// Applies a peer change to every kind: removed peers' probes stop and their series go,
  /// added peers' probes start. Kept peers are not touched (their rounds go on undisturbed).
  void UpdatePeers(const topology::PeerDiff& diff);

  /// Cancels everything (shutdown); series stay for a last scrape.
  void StopAll();

  /// Number of (kind, peer) pairs scheduled.
  std::size_t size() const;
  /// Rounds skipped because the previous round of the same pair was still running.
  std::uint64_t skipped_rounds() const { return skipped_rounds_; }

 private:
  struct Target;
  struct KindState {
    std::shared_ptr<probes::ProbeKind> kind;
    std::string name;                                        // the `probe` label
    std::map<std::string, std::shared_ptr<Target>> targets;  // by peer name (or target key)
    bool fixed_targets = false;                              // the kind's own Targets(), not peers
  };

  void Start(KindState& state, const topology::Peer& peer,
             std::shared_ptr<probes::PeerProbe> probe = nullptr);
  void Arm(const std::shared_ptr<Target>& t);
  static void Stop(Target& t, bool remove_series);

  boost::asio::io_context& io_;
  SchedulerMetrics* metrics_;
  std::mt19937_64 rng_;
  std::chrono::steady_clock::time_point epoch_;  // origin of the phase grid
  std::map<std::string, KindState, std::less<>> kinds_;
  std::uint64_t skipped_rounds_ = 0;
};

using Scheduler = BasicScheduler<std::chrono::steady_clock>;
extern template class BasicScheduler<std::chrono::steady_clock>;

}  // namespace podnet::scheduler
