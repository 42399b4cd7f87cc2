#include "exporter/probes/burst/burst_probe.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <optional>
#include <random>

#include "exporter/metrics/families.h"
#include "exporter/net/address.h"
#include "exporter/probes/burst/budget.h"
#include "exporter/probes/burst/burst_client.h"
#include "exporter/probes/peer_probe.h"

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
  prometheus::Registry& r;
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

class BurstPeerProbe;

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
        families_{env.metrics.registry()},
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

  const BurstOptions& options() const { return options_; }
  ProbeEnv& env() { return env_; }
  BurstFamilies& families() { return families_; }

  // Queues one round of `probe` (a burst per streams entry); `done` when it ends.
  void Enqueue(const std::shared_ptr<BurstPeerProbe>& probe, std::function<void()> done) {
    queue_.push_back({probe, std::move(done)});
    Pump();
  }

  // Drops a queued round of `probe` or ends its running burst (the probe ends its round).
  void Cancel(BurstPeerProbe* probe);

 private:
  struct Job {
    std::weak_ptr<BurstPeerProbe> probe;
    std::function<void()> done;
    std::size_t next_streams = 0;  // index into options_.streams
    bool charged = true;           // the running burst counts against the budget
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

class BurstPeerProbe : public PeerProbeBase {
 public:
  BurstPeerProbe(std::shared_ptr<BurstKind> kind, const topology::Peer& peer)
      : PeerProbeBase(kind->env(), "burst", peer), kind_(std::move(kind)) {
    sent_bytes_ = &series()->Add(env().metrics.probe_sent_bytes(), probe_labels());
    received_bytes_ = &series()->Add(env().metrics.probe_received_bytes(), probe_labels());
  }

  // What a burst of this probe's round sent and measured; also after Cancel (a cancelled burst's
  // bytes were sent), not after RemoveSeries.
  void Record(int streams, const BurstResult& r) {
    if (!series()) return;
    sent_bytes_->Increment(static_cast<double>(r.wire_bytes_sent));
    received_bytes_->Increment(static_cast<double>(r.wire_bytes_received));
    if (!r.error.empty()) return;
    prometheus::Labels labels{{"streams", std::to_string(streams)}};
    auto& f = kind_->families();
    AddSeries(f.sent, labels).Increment(static_cast<double>(r.bytes_sent));
    AddSeries(f.retransmits, labels).Increment(r.retransmits);
    AddSeries(f.cpu, labels).Increment(r.cpu_seconds);
    // A burst the budget cut short is mostly slow start: its rates would mislead.
    if (r.budget_cut &&
        r.seconds < 0.5 * std::chrono::duration<double>(kind_->options().duration).count()) {
      return;
    }
    AddSeries(f.throughput, labels).Set(r.throughput_bytes_per_second);
    AddSeries(f.rtt, labels).Set(r.rtt_seconds);
    AddSeries(f.cwnd, labels).Set(static_cast<double>(r.snd_cwnd_bytes));
    double slowest = -1;
    for (std::size_t i = 1; i < r.intervals.size(); ++i) {
      const auto& iv = r.intervals[i];
      double len = iv.end_seconds - iv.start_seconds;
      if (len < 0.05) continue;  // the last, cut-short interval says little
      double rate = static_cast<double>(iv.bytes) / len;
      if (slowest < 0 || rate < slowest) slowest = rate;
    }
    if (slowest >= 0) AddSeries(f.interval_min, labels).Set(slowest);
    // Added with the first burst that measured it: a peer never burst to has no MTU to show.
    if (r.pmtu > 0) AddSeries(f.pmtu, {}).Set(r.pmtu);
  }

 private:
  // Rounds of all peers queue in the kind, which ends each with EndRound.
  void StartRound(Clock::time_point) override {
    kind_->Enqueue(SharedSelf<BurstPeerProbe>(),
                   IfCurrent(this, [](auto& self) { self.EndRound(); }));
  }
  void StopRound() override { kind_->Cancel(this); }

  std::shared_ptr<BurstKind> kind_;
  prometheus::Counter* sent_bytes_ = nullptr;  // series()'s
  prometheus::Counter* received_bytes_ = nullptr;
};

std::shared_ptr<PeerProbe> BurstKind::ForPeer(const topology::Peer& peer) {
  return std::make_shared<BurstPeerProbe>(shared_from_this(), peer);
}

void BurstKind::Cancel(BurstPeerProbe* probe) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->probe.lock().get() == probe) {
      queue_.erase(it);
      return;
    }
  }
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
  if (!probe || probe->cancelled() || current_->next_streams >= options_.streams.size()) {
    return FinishJob();
  }
  int streams = options_.streams[current_->next_streams++];
  auto now = Clock::now();
  std::uint64_t remaining = budget_.Remaining(now);
  families_.budget_remaining.Set(static_cast<double>(remaining));
  current_->charged = !IsLoopback(probe->peer().address);
  std::uint64_t estimate =
      std::max(kMinBurstBytes, last_wire_bytes_.count(streams) ? last_wire_bytes_[streams] : 0);
  if (current_->charged && (remaining == 0 || remaining < estimate)) {
    probe->CountError("budget_exhausted");
    NoteBudget("skipped " + std::to_string(streams) + " streams to " + probe->peer().name +
               ": byte budget exhausted (" + std::to_string(remaining) +
               " bytes left this hour, a burst needs about " + std::to_string(estimate) + ")");
    return RunNext();
  }
  BurstRequest req;
  req.server = {probe->peer().address, probe->peer().burst_port};
  req.streams = streams;
  req.duration = options_.duration;
  req.step_timeout = options_.step_timeout;
  // Payload cap: what is left, less ~4 % for the headers the budget counts too.
  if (current_->charged) req.max_bytes = remaining - remaining / 25;
  client_ =
      BurstClient::Start(env_.io, req, [weak = weak_from_this(), streams](const BurstResult& r) {
        if (auto self = weak.lock()) self->OnResult(streams, r);
      });
}

void BurstKind::OnResult(int streams, const BurstResult& r) {
  client_.reset();
  auto now = Clock::now();
  bool charged = !current_ || current_->charged;
  if (charged) {
    budget_.Charge(now, r.wire_bytes_sent);
    if (r.error.empty()) last_wire_bytes_[streams] = r.wire_bytes_sent;
    if (r.error.empty() && !r.budget_cut) budget_noted_ = false;
  }
  families_.budget_remaining.Set(static_cast<double>(budget_.Remaining(now)));
  auto probe = current_ ? current_->probe.lock() : nullptr;
  if (probe && r.budget_cut) {
    NoteBudget(std::to_string(streams) + " streams to " + probe->peer().name + " cut after " +
               std::to_string(r.bytes_sent) + " bytes by the byte budget");
  }
  if (probe) {
    probe->Record(streams, r);
    if (!r.error.empty() && r.error != "cancelled") probe->CountError(r.error, r.detail);
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
          probe->peer().name, streams, r.seconds, r.bytes_sent, r.bytes_received,
          r.throughput_bytes_per_second, r.retransmits, r.rtt_seconds, r.snd_cwnd_bytes, r.pmtu,
          r.cpu_seconds, shape, r.budget_cut);
    }
  }
  if (r.error == "cancelled" || !probe || probe->cancelled()) return FinishJob();
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

}  // namespace podnet::probes::burst
