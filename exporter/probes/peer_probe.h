#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "exporter/metrics/metrics.h"
#include "exporter/probes/probe.h"

namespace podnet::probes {

/// The round lifecycle every probe kind shares, owned once (as Envoy's HealthCheckerImplBase
/// owns timers and host add/remove for its checkers): a kind derives from it and writes only its
/// measurement — StartRound, StopRound, and what it records. Probe loop only, as PeerProbe.
///
/// The contract (tests/unit/probes/peer_probe_test.cc proves it once for every kind):
///  - Run opens a round: the generation moves on, then StartRound(scheduled). The kind ends it
///    with EndRound(); the scheduler's `done` fires then, exactly once per round.
///  - Cancel moves the generation on (every completion handler made by IfCurrent before it is
///    dropped), calls StopRound, and ends the open round; `done` still fires once. A cancelled
///    probe's later rounds end at once, without StartRound.
///  - RemoveSeries cancels (a probe without series has nothing to measure into) and removes every
///    series the probe added through series() (metrics::SeriesSet: a series other probes still
///    feed stays). After it the probe touches no metric again.
///  - CountError adds podnet_probe_errors_total{<labels>, probe=<kind>, reason} once per reason
///    and increments it.
class PeerProbeBase : public PeerProbe, public std::enable_shared_from_this<PeerProbeBase> {
 public:
  void Run(std::chrono::steady_clock::time_point scheduled, std::function<void()> done) final;
  void Cancel() final;
  void RemoveSeries() final;

  /// The peer (for targets that are not peers: its name is the target's key).
  const topology::Peer& peer() const { return peer_; }
  bool cancelled() const { return cancelled_; }

  /// Counts one failure of this probe under `reason` (a snake_case label value) and logs it at
  /// debug with `detail`. Nothing after RemoveSeries.
  void CountError(std::string_view reason, std::string_view detail = {});

 protected:
  /// A probe of kind `kind` (the `probe` label) towards `peer`, whose series carry `labels`
  /// (metrics::PeerLabels towards a peer; none for the dns targets, whose byte and error
  /// counters carry only probe="dns"), and whose histograms carry `histogram_labels` (when
  /// absent: `labels`).
  PeerProbeBase(ProbeEnv& env, std::string_view kind, topology::Peer peer,
                prometheus::Labels labels,
                std::optional<prometheus::Labels> histogram_labels = std::nullopt);
  /// Towards a peer: labels = env.PeerLabels(peer), histograms env.HistogramLabels(peer), byte
  /// counters the peer's zone and path class (AddByteCounters).
  PeerProbeBase(ProbeEnv& env, std::string_view kind, const topology::Peer& peer);

  /// Begins the kind's measurement for the round due at `scheduled` (its sends and deadlines are
  /// laid out from it). Must lead to EndRound() within the kind's own deadline, unless cancelled.
  virtual void StartRound(std::chrono::steady_clock::time_point scheduled) = 0;
  /// Stops the kind's work in progress (timers, connections, calls); Cancel ends the round after.
  virtual void StopRound() {}

  /// Ends the open round: the scheduler's `done` fires. Does nothing when no round is open.
  void EndRound();

  /// Moves the generation on: completions made by IfCurrent until now are dropped. Run and
  /// Cancel do it; a kind whose round has steps of its own (http: one run per mode) may too.
  std::uint64_t NextGeneration() { return ++gen_; }
  std::uint64_t generation() const { return gen_; }

  /// `fn(*self, args...)` as a completion handler that holds the probe weakly and does nothing
  /// once the probe is gone or its generation has moved on (a later round or step, Cancel).
  /// `self` is `this` of the kind's class: IfCurrent(this, [](auto& self, ...) {...}).
  template <typename Self, typename Fn>
  auto IfCurrent(Self*, Fn fn) {
    return [weak = weak_from_this(), gen = gen_, fn = std::move(fn)](auto&&... args) {
      auto self = weak.lock();
      if (self && self->gen_ == gen) {
        fn(static_cast<Self&>(*self), std::forward<decltype(args)>(args)...);
      }
    };
  }

  /// This probe as its kind's class.
  template <typename Self>
  std::shared_ptr<Self> SharedSelf() {
    return std::static_pointer_cast<Self>(shared_from_this());
  }

  /// series()->Add(family, labels() and `extra`, args...): one more series of this probe's.
  template <typename T, typename... Args>
  T& AddSeries(prometheus::Family<T>& family, prometheus::Labels extra, Args&&... args) {
    extra.insert(labels_.begin(), labels_.end());
    return series_->Add(family, extra, std::forward<Args>(args)...);
  }
  /// The same for a histogram, with its family's bucket layout and histogram_labels() in place
  /// of labels() (per peer zone and path class unless metrics.per_peer_histograms).
  metrics::HistogramSeries AddSeries(const metrics::HistogramFamily& histogram,
                                     prometheus::Labels extra) {
    extra.insert(histogram_labels_.begin(), histogram_labels_.end());
    return series_->Add(histogram, extra);
  }
  /// Removes the series this probe added so far, as RemoveSeries does, but the probe goes on:
  /// for a target that stops measuring for a while (a DNS lookup while its Pod is outside the
  /// sample), so that it leaves no series standing still. Its next series start from zero.
  void DropSeries();
  /// The series this probe adds (and RemoveSeries removes); null after RemoveSeries.
  metrics::SeriesSet* series() { return series_ ? &*series_ : nullptr; }
  ProbeEnv& env() { return env_; }
  /// podnet_probe_{sent,received}_bytes_total of this probe, added at 0 (sent, received). Their
  /// labels: probe=<kind> and, towards a peer, source_node, source_zone, peer_zone and path_class
  /// but not the peer: the bytes are the cost model's input, whose question is per path class
  /// and zone pair, and every peer of a kind costs the same (9 peers x 4 kinds x 2 series
  /// would be ~70 of a Pod's series). Towards a target without peer labels: probe=<kind>.
  std::pair<prometheus::Counter*, prometheus::Counter*> AddByteCounters();

  /// The probe's series labels, and those plus probe=<kind> (its error counters').
  const prometheus::Labels& labels() const { return labels_; }
  const prometheus::Labels& probe_labels() const { return probe_labels_; }
  /// The labels of this probe's histograms (ProbeEnv::HistogramLabels towards a peer).
  const prometheus::Labels& histogram_labels() const { return histogram_labels_; }

 private:
  ProbeEnv& env_;
  std::string kind_;
  topology::Peer peer_;
  prometheus::Labels labels_;
  prometheus::Labels probe_labels_;
  prometheus::Labels histogram_labels_;
  prometheus::Labels byte_labels_;
  std::optional<metrics::SeriesSet> series_;
  // Looked up once per reason: a peer that fails every round costs no label copies and no
  // registry lookup per failure.
  std::map<std::string, prometheus::Counter*, std::less<>> errors_;
  std::function<void()> done_;  // set while a round is open
  std::uint64_t gen_ = 0;
  bool cancelled_ = false;
};

}  // namespace podnet::probes
