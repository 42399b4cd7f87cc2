#include "exporter/probes/burst/burst_probe.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "exporter/metrics/families.h"
#include "exporter/net/address.h"
#include "exporter/probes/burst/budget.h"
#include "exporter/probes/burst/burst_client.h"
#include "exporter/probes/burst/coordination.h"
#include "exporter/probes/peer_probe.h"
#include "exporter/topology/burst_pairs.h"
#include "exporter/topology/sample.h"

namespace podnet::probes::burst {
namespace {

using Clock = std::chrono::steady_clock;

// Fewer bytes than this left in the budget: not worth a burst (it would not leave slow start).
constexpr std::uint64_t kMinBurstBytes = 1'000'000;
// Pause after each burst: a stock `iperf3 -s` re-opens its listener after every test and
// refuses connections meanwhile; it also lets the path's queues drain between bursts.
constexpr auto kGapBetweenBursts = std::chrono::milliseconds(250);

// Declared in `r` each time the kind is made (prometheus-cpp merges a re-declaration).
struct BurstFamilies {
  metrics::Metrics& r;
  metrics::GaugeFamily& throughput =
      metrics::DeclareGauge(r, "podnet_burst_throughput_bytes_per_second",
                            "Goodput of the last TCP burst: bytes the receiver read / data time.");
  metrics::CounterFamily& sent = metrics::DeclareCounter(r, "podnet_burst_sent_bytes_total",
                                                         "Payload bytes written by TCP bursts.");
  metrics::CounterFamily& retransmits =
      metrics::DeclareCounter(r, "podnet_burst_retransmits_total",
                              "TCP segments retransmitted during bursts (tcpi_total_retrans).");
  metrics::GaugeFamily& rtt = metrics::DeclareGauge(
      r, "podnet_burst_tcp_rtt_seconds",
      "Mean smoothed TCP RTT (tcpi_rtt) of the sender during the last burst.");
  metrics::GaugeFamily& cwnd =
      metrics::DeclareGauge(r, "podnet_burst_snd_cwnd_bytes",
                            "Largest congestion window of the last burst (tcpi_snd_cwnd x "
                            "tcpi_snd_mss), summed over its streams.");
  metrics::GaugeFamily& interval_min =
      metrics::DeclareGauge(r, "podnet_burst_interval_min_throughput_bytes_per_second",
                            "Slowest 100 ms interval of the last burst after the first one "
                            "(sender's view).");
  metrics::CounterFamily& cpu =
      metrics::DeclareCounter(r, "podnet_burst_sender_cpu_seconds_total",
                              "CPU time the sending thread spent in bursts' data phases.");
  metrics::GaugeFamily& pmtu =
      metrics::DeclareGauge(r, "podnet_burst_path_mtu_bytes",
                            "Path MTU the kernel used during the last burst (tcpi_pmtu).");
  prometheus::Gauge& budget_remaining =
      metrics::DeclareGauge(r, "podnet_burst_budget_remaining_bytes",
                            "Bytes bursts may still send within the sliding hour of "
                            "max_bytes_per_hour.")
          .Add({});
};

// Declared only in coordinated mode (peers.kubernetes): without it there is nothing to skip.
struct CoordinationFamilies {
  metrics::Metrics& r;
  metrics::CounterFamily& skipped = metrics::DeclareCounter(
      r, "podnet_burst_pairs_skipped_total",
      "Coordinated zone pairs (period, own zone -> peer zone) this Pod did not burst on.");
};

// What a burst belongs to: a per-peer probe (static peers) or the coordinated probe. The kind
// runs its bursts one at a time and hands each result back here.
class BurstTarget {
 public:
  virtual ~BurstTarget() = default;
  virtual bool Stopped() const = 0;
  // A burst towards `peer` ended (sent bytes count also when it failed or was cancelled).
  virtual void Record(const topology::Peer& peer, int streams, const BurstResult& r) = 0;
  virtual void Failed(const topology::Peer& peer, std::string_view reason,
                      std::string_view detail) = 0;
};

// One budget per process, not per configuration: a reload (which rebuilds the kind) must not
// hand out a fresh hour of bytes. Probe loop only.
ByteBudget& ProcessBudget() {
  static ByteBudget budget(0);
  return budget;
}

class BurstKind : public ProbeKind, public std::enable_shared_from_this<BurstKind> {
 public:
  BurstKind(const BurstOptions& options, ProbeEnv& env)
      : options_(options),
        env_(env),
        families_{env.metrics},
        coordination_(coordinated() ? std::make_optional<CoordinationFamilies>(
                                          CoordinationFamilies{env.metrics})
                                    : std::nullopt),
        budget_(ProcessBudget()),
        wait_timer_(env.io),
        rng_(std::random_device{}()) {
    budget_.set_limit(options.max_bytes_per_hour);
    families_.budget_remaining.Set(static_cast<double>(budget_.Remaining(Clock::now())));
  }
  ~BurstKind() override {
    if (client_) client_->Cancel();
  }

  std::string_view name() const override { return "burst"; }
  config::Duration interval() const override { return options_.interval; }
  std::shared_ptr<PeerProbe> ForPeer(const topology::Peer& peer) override;
  // Coordinated (peers.kubernetes): one target instead of one probe per peer.
  std::vector<std::string> Targets() const override {
    if (coordinated()) return {"coordinated"};
    return {};
  }
  std::shared_ptr<PeerProbe> ForTarget(const std::string& key) override;
  bool loads_path() const override { return true; }  // seconds at line rate

  bool coordinated() const { return env_.probe_pods.has_value(); }
  const BurstOptions& options() const { return options_; }
  ProbeEnv& env() { return env_; }
  BurstFamilies& families() { return families_; }
  CoordinationFamilies& coordination() { return *coordination_; }

  // Queues one round of `probe` towards `peer` (a burst per streams entry, each sending at most
  // `max_bytes` payload bytes, 0 = no bound of its own); `done` when it ends.
  void Enqueue(const std::shared_ptr<BurstTarget>& probe, const topology::Peer& peer,
               std::uint64_t max_bytes, std::function<void()> done) {
    queue_.push_back({probe, peer, std::move(done), max_bytes});
    Pump();
  }

  // Drops the queued rounds of `probe` and ends its running burst (the probe ends its round).
  void Cancel(BurstTarget* probe);

 private:
  struct Job {
    std::weak_ptr<BurstTarget> probe;
    topology::Peer peer;
    std::function<void()> done;
    std::uint64_t max_bytes = 0;   // the round's own bound per burst (coordinated); 0 = none
    std::size_t next_streams = 0;  // index into options_.streams
    bool charged = true;           // the running burst counts against the budget
    bool budget_binds = false;     // the running burst's byte cap is what the budget has left
  };

  // A budget cut or skip: at info the first time, then at debug until a burst runs uncut
  // again (a full budget would otherwise log every burst of every peer for the rest of the
  // hour).
  void NoteBudget(const std::string& what) {
    spdlog::log(budget_noted_ ? spdlog::level::debug : spdlog::level::info,
                "burst: {} ({} bytes an hour, max_bytes_per_hour){}", what, budget_.limit(),
                budget_noted_ ? ""
                              : "; further budget cuts and skips are logged at debug until the "
                                "budget has room again");
    budget_noted_ = true;
  }

  void Pump();
  void WaitThenRun(config::Duration delay);
  void RunNext();
  void OnResult(int streams, const BurstResult& r);
  void FinishJob();

  BurstOptions options_;
  ProbeEnv& env_;
  BurstFamilies families_;
  std::optional<CoordinationFamilies> coordination_;  // coordinated() only
  ByteBudget& budget_;  // ProcessBudget(): what bursts sent survives a reload
  boost::asio::steady_timer wait_timer_;
  std::mt19937_64 rng_;
  std::deque<Job> queue_;
  std::optional<Job> current_;
  bool waiting_ = false;  // for wait_timer_: the jitter before a round, the gap between bursts
  std::shared_ptr<BurstClient> client_;
  std::map<int, std::uint64_t> last_wire_bytes_;  // by stream count: the next burst's estimate
  bool budget_noted_ = false;                     // NoteBudget logged at info in the current streak
};

// Loopback traffic never leaves the host: no link carries it and no provider bills it, so a
// burst to a loopback address (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104) is not charged to
// max_bytes_per_hour. Its bytes still count in podnet_probe_sent_bytes_total.
bool IsLoopback(const boost::asio::ip::address& a) { return net::Unmapped(a).is_loopback(); }

// The burst series and counters both probe shapes share: added under `pair` (empty for a
// per-peer probe, whose own labels name the peer; a zone pair's labels for the coordinated
// probe) and the probe's labels. The last-value gauges it sets go into *gauges when given.
class BurstProbeBase : public PeerProbeBase, public BurstTarget {
 public:
  bool Stopped() const override { return cancelled(); }

 protected:
  BurstProbeBase(std::shared_ptr<BurstKind> kind, const topology::Peer& peer,
                 prometheus::Labels labels)
      : PeerProbeBase(kind->env(), "burst", peer, std::move(labels)), kind_(std::move(kind)) {}

  // podnet_probe_{sent,received}_bytes_total{probe="burst"} under `pair` (added at 0 first).
  std::pair<prometheus::Counter*, prometheus::Counter*> ByteCounters(
      const prometheus::Labels& pair) {
    prometheus::Labels l = pair;
    l["probe"] = "burst";
    return {&AddSeries(env().metrics.probe_sent_bytes(), l),
            &AddSeries(env().metrics.probe_received_bytes(), l)};
  }

  // What a burst sent and measured; also after Cancel (a cancelled burst's bytes were sent),
  // not after RemoveSeries.
  void RecordUnder(const prometheus::Labels& pair, int streams, const BurstResult& r,
                   std::set<const void*>* gauges) {
    if (!series()) return;
    auto [sent_bytes, received_bytes] = ByteCounters(pair);
    sent_bytes->Increment(static_cast<double>(r.wire_bytes_sent));
    received_bytes->Increment(static_cast<double>(r.wire_bytes_received));
    if (!r.error.empty()) return;
    prometheus::Labels labels = pair;
    labels["streams"] = std::to_string(streams);
    auto& f = kind_->families();
    AddSeries(f.sent, labels).Increment(static_cast<double>(r.bytes_sent));
    AddSeries(f.retransmits, labels).Increment(r.retransmits);
    AddSeries(f.cpu, labels).Increment(r.cpu_seconds);
    // A burst the budget cut short is mostly slow start: its rates would mislead.
    if (r.budget_cut &&
        r.seconds < 0.5 * std::chrono::duration<double>(kind_->options().duration).count()) {
      return;
    }
    auto gauge = [&](metrics::GaugeFamily& family,
                     const prometheus::Labels& l) -> prometheus::Gauge& {
      auto& g = AddSeries(family, l);
      if (gauges) gauges->insert(&g);
      return g;
    };
    gauge(f.throughput, labels).Set(r.throughput_bytes_per_second);
    gauge(f.rtt, labels).Set(r.rtt_seconds);
    gauge(f.cwnd, labels).Set(static_cast<double>(r.snd_cwnd_bytes));
    double slowest = -1;
    for (std::size_t i = 1; i < r.intervals.size(); ++i) {
      const auto& iv = r.intervals[i];
      double len = iv.end_seconds - iv.start_seconds;
      if (len < 0.05) continue;  // the last, cut-short interval says little
      double rate = static_cast<double>(iv.bytes) / len;
      if (slowest < 0 || rate < slowest) slowest = rate;
    }
    if (slowest >= 0) gauge(f.interval_min, labels).Set(slowest);
    // Added with the first burst that measured it: a peer never burst to has no MTU to show.
    if (r.pmtu > 0) gauge(f.pmtu, pair).Set(r.pmtu);
  }

  // Rounds queue in the kind; StopRound drops them (Cancel ends the round after).
  void StopRound() override { kind_->Cancel(this); }

  std::shared_ptr<BurstKind> kind_;
};

// Static peers (no Kubernetes discovery): every peer gets its round every interval.
class BurstPeerProbe : public BurstProbeBase {
 public:
  BurstPeerProbe(std::shared_ptr<BurstKind> kind, const topology::Peer& peer)
      : BurstProbeBase(kind, peer, kind->env().PeerLabels(peer)) {
    ByteCounters({});  // at 0 from the start: the first burst's bytes show in increase()
  }

  void Record(const topology::Peer&, int streams, const BurstResult& r) override {
    RecordUnder({}, streams, r, nullptr);
  }
  void Failed(const topology::Peer&, std::string_view reason, std::string_view detail) override {
    CountError(reason, detail);
  }

 private:
  // Rounds of all peers queue in the kind, which ends each with EndRound.
  void StartRound(Clock::time_point) override {
    kind_->Enqueue(SharedSelf<BurstPeerProbe>(), peer(), 0,
                   IfCurrent(this, [](auto& self) { self.EndRound(); }));
  }
};

// Coordinated bursts (peers.kubernetes; BurstOptions::Coordinated): one target per exporter.
// Each round decides the pairs (own zone -> zone) not yet decided this period (PeriodLatch):
// where this Pod is the prober it bursts to the chosen peer, elsewhere it skips, counted.
//
// Series are per zone pair, not per peer (labels source_node, source_zone, peer_zone, path_class:
// the peer changes every period, and a per-peer series would be a new one every time): the
// counters stay (at most one set per zone), and the last-value gauges (throughput, TCP RTT,
// cwnd, slowest interval, path MTU) are removed at this Pod's first round of a period in
// which it does not burst on that pair — a Pod that is not the pair's prober this period does
// not go on exporting the last period's figure as if it were fresh. So a pair's gauges exist
// at one Pod at a time, from its burst to the end of that period (plus up to one interval).
class CoordinatedProbe : public BurstProbeBase {
 public:
  explicit CoordinatedProbe(std::shared_ptr<BurstKind> kind) : BurstProbeBase(kind, Target(), {}) {}

  void Record(const topology::Peer& peer, int streams, const BurstResult& r) override {
    Pair& pair = pairs_[peer.zone];
    RecordUnder(pair.labels, streams, r, &pair.gauges);
  }
  void Failed(const topology::Peer& peer, std::string_view reason,
              std::string_view detail) override {
    SPDLOG_DEBUG("burst probe error peer={} reason={} {}", peer.name, reason, detail);
    if (!series()) return;
    prometheus::Labels l = pairs_[peer.zone].labels;
    l["probe"] = "burst";
    l["reason"] = std::string(reason);
    AddSeries(env().metrics.probe_errors(), l).Increment();
  }

 private:
  struct Pair {
    prometheus::Labels labels;  // the zone pair's (metrics::PeerLabelSet::kAggregated)
    std::uint64_t period = 0;   // of its last burst
    std::set<const void*> gauges;
  };

  static topology::Peer Target() {
    topology::Peer p;
    p.name = "coordinated";
    return p;
  }

  void StartRound(Clock::time_point) override {
    ProbeEnv& e = env();
    if (!e.burst_latch) e.burst_latch = std::make_shared<PeriodLatch>();
    auto candidates = topology::BurstCandidates(
        e.self, e.probe_pods ? *e.probe_pods : std::vector<topology::Peer>{});
    const auto& o = kind_->options().coordinated;
    auto now = e.wall_clock ? e.wall_clock() : std::chrono::system_clock::now();
    std::uint64_t period = topology::PeriodNumber(now, o.period);
    PeriodDecision d = e.burst_latch->Decide(period, e.self, candidates, e.service_uid);
    auto& skipped = kind_->coordination().skipped;
    if (d.not_chosen) {
      AddSeries(skipped, {{"reason", "not_chosen"}}).Increment(static_cast<double>(d.not_chosen));
    }
    if (d.not_listed) {
      AddSeries(skipped, {{"reason", "not_listed"}}).Increment(static_cast<double>(d.not_listed));
    }
    for (const auto& peer : d.targets) {
      Pair& pair = pairs_[peer.zone];
      pair.labels = metrics::PeerLabels(e.self, peer, metrics::PeerLabelSet::kAggregated);
      pair.period = period;
      ByteCounters(pair.labels);
      SPDLOG_DEBUG("burst: prober of {} -> {} in period {}: bursting to {}", e.self.zone, peer.zone,
                   period, peer.name);
    }
    for (auto& [zone, pair] : pairs_) {
      if (pair.period == period || pair.gauges.empty()) continue;
      for (const void* g : pair.gauges) series()->Remove(g);
      pair.gauges.clear();
    }
    if (d.targets.empty()) return EndRound();
    outstanding_ = d.targets.size();
    for (const auto& peer : d.targets) {
      kind_->Enqueue(SharedSelf<CoordinatedProbe>(), peer, o.max_bytes_per_burst,
                     IfCurrent(this, [](auto& self) {
                       if (--self.outstanding_ == 0) self.EndRound();
                     }));
    }
  }

  std::map<std::string, Pair> pairs_;  // by peer zone
  std::size_t outstanding_ = 0;        // rounds of this round's pairs still queued or running
};

std::shared_ptr<PeerProbe> BurstKind::ForPeer(const topology::Peer& peer) {
  return std::make_shared<BurstPeerProbe>(shared_from_this(), peer);
}

std::shared_ptr<PeerProbe> BurstKind::ForTarget(const std::string& key) {
  if (key != "coordinated" || !coordinated()) return nullptr;
  return std::make_shared<CoordinatedProbe>(shared_from_this());
}

void BurstKind::Cancel(BurstTarget* probe) {
  // A gone probe's jobs (expired weak_ptr) go too: RunNext would only finish them.
  std::erase_if(queue_, [probe](const Job& j) {
    auto p = j.probe.lock();
    return !p || p.get() == probe;
  });
  if (current_ && current_->probe.lock().get() == probe) {
    if (client_) {
      client_->Cancel();  // OnResult(cancelled) finishes the job
    } else if (waiting_) {
      wait_timer_.cancel();
      waiting_ = false;
      FinishJob();
    }
  }
}

void BurstKind::Pump() {
  if (current_ || queue_.empty()) return;
  current_ = std::move(queue_.front());
  queue_.pop_front();
  // A random delay, so that rounds (and exporters) drift apart rather than lock step.
  auto max_jitter = std::min<config::Duration>(options_.interval / 10, std::chrono::seconds(10));
  std::uniform_int_distribution<std::int64_t> pick(0,
                                                   std::max<std::int64_t>(0, max_jitter.count()));
  WaitThenRun(config::Duration(pick(rng_)));
}

void BurstKind::WaitThenRun(config::Duration delay) {
  waiting_ = true;
  wait_timer_.expires_after(delay);
  wait_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || !self->waiting_) return;
    self->waiting_ = false;
    self->RunNext();
  });
}

void BurstKind::RunNext() {
  auto probe = current_->probe.lock();
  if (!probe || probe->Stopped() || current_->next_streams >= options_.streams.size()) {
    return FinishJob();
  }
  int streams = options_.streams[current_->next_streams++];
  auto now = Clock::now();
  std::uint64_t remaining = budget_.Remaining(now);
  families_.budget_remaining.Set(static_cast<double>(remaining));
  const topology::Peer& peer = current_->peer;
  current_->charged = !IsLoopback(peer.address);
  std::uint64_t estimate =
      std::max(kMinBurstBytes, last_wire_bytes_.count(streams) ? last_wire_bytes_[streams] : 0);
  if (current_->charged && (remaining == 0 || remaining < estimate)) {
    probe->Failed(peer, "budget_exhausted", {});
    NoteBudget("skipped " + std::to_string(streams) + " streams to " + peer.name +
               ": byte budget exhausted (" + std::to_string(remaining) +
               " bytes left this hour, a burst needs about " + std::to_string(estimate) + ")");
    return RunNext();
  }
  BurstRequest req;
  req.server = {peer.address, peer.burst_port};
  req.streams = streams;
  req.duration = options_.duration;
  req.step_timeout = options_.step_timeout;
  // Payload cap: what is left, less ~4 % for the headers the budget counts too; and the round's
  // own bound per burst (coordinated), whichever is smaller.
  std::uint64_t left = current_->charged ? remaining - remaining / 25 : 0;
  current_->budget_binds = left > 0 && (current_->max_bytes == 0 || left < current_->max_bytes);
  if (current_->budget_binds) {
    req.max_bytes = left;
  } else if (current_->max_bytes > 0) {
    req.max_bytes = current_->max_bytes;
  }
  client_ =
      BurstClient::Start(env_.io, req, [weak = weak_from_this(), streams](const BurstResult& r) {
        if (auto self = weak.lock()) self->OnResult(streams, r);
      });
}

void BurstKind::OnResult(int streams, const BurstResult& result) {
  client_.reset();
  auto now = Clock::now();
  bool charged = !current_ || current_->charged;
  // Cut by the budget, or ended at the round's own byte bound (a burst of a set size, as
  // `iperf3 -n`: its rates stand).
  BurstResult r = result;
  r.budget_cut = result.budget_cut && current_ && current_->budget_binds;
  if (charged) {
    budget_.Charge(now, r.wire_bytes_sent);
    if (r.error.empty()) last_wire_bytes_[streams] = r.wire_bytes_sent;
    if (r.error.empty() && !r.budget_cut) budget_noted_ = false;
  }
  families_.budget_remaining.Set(static_cast<double>(budget_.Remaining(now)));
  auto probe = current_ ? current_->probe.lock() : nullptr;
  if (probe && r.budget_cut) {
    NoteBudget(std::to_string(streams) + " streams to " + current_->peer.name + " cut after " +
               std::to_string(r.bytes_sent) + " bytes by the byte budget");
  }
  if (probe) {
    probe->Record(current_->peer, streams, r);
    if (!r.error.empty() && r.error != "cancelled")
      probe->Failed(current_->peer, r.error, r.detail);
    if (r.error.empty() && spdlog::should_log(spdlog::level::debug)) {
      // The burst's shape: Mbit/s of each 100 ms interval (slow start, throttling).
      std::string shape;
      for (const auto& iv : r.intervals) {
        double len = iv.end_seconds - iv.start_seconds;
        if (len <= 0) continue;
        shape += (shape.empty() ? "" : ",") +
                 std::to_string(static_cast<long long>(iv.bytes * 8e-6 / len));
      }
      SPDLOG_DEBUG(
          "burst done peer={} streams={} seconds={:.3f} sent_bytes={} received_bytes={} "
          "throughput_bytes_per_second={:.0f} retransmits={} rtt_seconds={:.6f} cwnd_bytes={} "
          "pmtu={} cpu_seconds={:.3f} interval_mbps=[{}] budget_cut={}",
          current_->peer.name, streams, r.seconds, r.bytes_sent, r.bytes_received,
          r.throughput_bytes_per_second, r.retransmits, r.rtt_seconds, r.snd_cwnd_bytes, r.pmtu,
          r.cpu_seconds, shape, r.budget_cut);
    }
  }
  if (r.error == "cancelled" || !probe || probe->Stopped()) return FinishJob();
  WaitThenRun(kGapBetweenBursts);
}

void BurstKind::FinishJob() {
  auto job = std::move(current_);
  current_.reset();
  if (job && job->done) job->done();
  Pump();
}

}  // namespace

std::shared_ptr<ProbeKind> MakeBurstKind(const BurstOptions& options, ProbeEnv& env) {
  return std::make_shared<BurstKind>(options, env);
}

// Per stream count, 4 last-value gauges and 3 counters for each peer it bursts to (with
// peers.kubernetes: each zone pair this Pod is chosen for, at most one per zone), and the path
// MTU once per peer.
std::size_t CountSeries(const config::Config& c, SeriesCounter& n) {
  const std::size_t zones = n.shape().zones;
  std::size_t targets = c.kubernetes ? zones : n.peers();
  std::size_t per_stream = targets * c.burst->streams.size();
  for (const char* f :
       {"podnet_burst_throughput_bytes_per_second", "podnet_burst_tcp_rtt_seconds",
        "podnet_burst_snd_cwnd_bytes", "podnet_burst_interval_min_throughput_bytes_per_second",
        "podnet_burst_sent_bytes_total", "podnet_burst_retransmits_total",
        "podnet_burst_sender_cpu_seconds_total"}) {
    n.Add(f, per_stream);
  }
  n.Add("podnet_burst_path_mtu_bytes", targets);
  n.Add("podnet_burst_budget_remaining_bytes", 1);
  if (c.kubernetes) n.Add("podnet_burst_pairs_skipped_total", 2);
  return c.kubernetes ? std::min(zones, n.groups()) : n.peers();
}

}  // namespace podnet::probes::burst
