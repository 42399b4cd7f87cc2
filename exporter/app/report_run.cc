#include "exporter/app/report_run.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <ctime>
#include <iostream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "exporter/app/app.h"
#include "exporter/app/cost_inputs.h"
#include "exporter/config/read_file.h"
#include "exporter/report/report.h"
#include "exporter/report/report_html.h"
#include "exporter/topology/safe_text.h"
#include "podnet/version.h"

namespace podnet::app {
namespace {

using Clock = std::chrono::steady_clock;

// Probe loop only. Decides which rounds may start (those scheduled before the deadline), counts
// the rounds each (kind, target) finished, and stops the App once the deadline passed and no
// round is in flight (or the grace after it is over).
class Session : public std::enable_shared_from_this<Session> {
 public:
  // `burst_round`: how long one held burst round may take at most (all its stream counts).
  Session(config::Duration duration, config::Duration burst_round, std::function<void()> finish)
      : duration_(duration), burst_round_(burst_round), finish_(std::move(finish)) {}

  // The probe loop turns: from now, a run with no target at all ends after --duration.
  void Begin(boost::asio::io_context& io) {
    io_ = &io;
    ArmDeadline();
  }

  // A (kind, target) pair the scheduler starts; the first one starts the --duration clock.
  int* Register(const std::string& kind, const std::string& target, const std::string& path) {
    if (!deadline_) ArmDeadline();
    auto& t = targets_[{kind, target}];
    t.path = path;
    return &t.rounds;
  }

  bool MayStart(Clock::time_point scheduled) const {
    return !closed_ && (!deadline_ || scheduled < *deadline_);
  }
  // A burst round due in the latency phase waits for its end: bursts fill the path's queues
  // and would show in every latency figure measured beside them (tests/lab/README.md: measure
  // latency and throughput separately).
  void Hold(std::function<void()> start) { held_.push_back(std::move(start)); }
  void Started() { ++in_flight_; }
  void Ended(int* rounds) {
    --in_flight_;
    ++*rounds;
    if (closed_ && in_flight_ == 0) Finish();
  }

  config::Duration duration() const { return duration_; }
  bool closed() const { return closed_; }
  // After the App's loops ended, before its io_context goes: the timer must not outlive it.
  void Release() { timer_.reset(); }

  std::vector<report::RunInfo::Target> Targets() const {
    std::vector<report::RunInfo::Target> out;
    for (const auto& [k, t] : targets_) out.push_back({k.first, k.second, t.path, t.rounds});
    return out;
  }

 private:
  struct TargetState {
    std::string path;
    int rounds = 0;
  };

  void ArmDeadline() {
    if (!io_ || closed_) return;
    deadline_ = Clock::now() + duration_;
    timer_ = std::make_unique<boost::asio::steady_timer>(*io_, *deadline_);
    timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->Close();
    });
  }

  void Close() {
    closed_ = true;
    const auto held = static_cast<int>(held_.size());
    if (held > 0) spdlog::info("report: latency phase over, {} burst round(s) now", held);
    for (auto& start : std::exchange(held_, {})) start();
    if (in_flight_ == 0) return Finish();
    // The burst kind runs the held rounds one after another: each adds its bound, or a big
    // cluster's last rounds would be cut and counted as failed.
    auto grace =
        std::max<config::Duration>(duration_, std::chrono::seconds(30)) + held * burst_round_;
    spdlog::info("report: {} round(s) still running, waiting up to {} s", in_flight_,
                 std::chrono::duration_cast<std::chrono::seconds>(grace).count());
    timer_ = std::make_unique<boost::asio::steady_timer>(*io_, grace);
    timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;
      spdlog::warn("report: {} round(s) did not end in time; not counted", self->in_flight_);
      self->Finish();
    });
  }

  void Finish() {
    if (finished_) return;
    finished_ = true;
    if (timer_) timer_->cancel();
    finish_();
  }

  config::Duration duration_;
  config::Duration burst_round_;
  std::function<void()> finish_;
  boost::asio::io_context* io_ = nullptr;
  std::optional<Clock::time_point> deadline_;
  std::unique_ptr<boost::asio::steady_timer> timer_;
  bool closed_ = false, finished_ = false;
  int in_flight_ = 0;
  std::vector<std::function<void()>> held_;
  std::map<std::pair<std::string, std::string>, TargetState> targets_;
};

// A probe whose rounds start only while the session lets them, and are counted. A `deferred`
// kind's rounds (one that loads the path: ProbeKind::loads_path) due in the latency phase start
// when it ends.
class GatedProbe : public probes::PeerProbe, public std::enable_shared_from_this<GatedProbe> {
 public:
  GatedProbe(std::shared_ptr<probes::PeerProbe> inner, std::shared_ptr<Session> session,
             int* rounds, bool deferred)
      : inner_(std::move(inner)),
        session_(std::move(session)),
        rounds_(rounds),
        deferred_(deferred) {}

  void Run(Clock::time_point scheduled, std::function<void()> done) override {
    if (!session_->MayStart(scheduled)) return done();
    if (deferred_ && !session_->closed()) {
      held_ = std::move(done);
      session_->Hold([weak = weak_from_this()] {
        if (auto self = weak.lock(); self && self->held_) {
          self->Start(Clock::now(), std::exchange(self->held_, nullptr));
        }
      });
      return;
    }
    Start(scheduled, std::move(done));
  }
  void Cancel() override {
    if (held_) std::exchange(held_, nullptr)();
    inner_->Cancel();
  }
  void RemoveSeries() override {
    if (held_) std::exchange(held_, nullptr)();
    inner_->RemoveSeries();
  }

 private:
  void Start(Clock::time_point scheduled, std::function<void()> done) {
    session_->Started();
    inner_->Run(scheduled, [session = session_, rounds = rounds_, done = std::move(done)] {
      done();
      session->Ended(rounds);
    });
  }

  std::shared_ptr<probes::PeerProbe> inner_;
  std::shared_ptr<Session> session_;
  int* rounds_;
  bool deferred_;
  std::function<void()> held_;  // the scheduler's `done` of a round waiting for its phase
};

// A probe kind with its interval capped at --duration and its probes gated by the session.
class GatedKind : public probes::ProbeKind {
 public:
  GatedKind(std::shared_ptr<probes::ProbeKind> inner, std::shared_ptr<Session> session)
      : inner_(std::move(inner)), session_(std::move(session)) {}

  std::string_view name() const override { return inner_->name(); }
  config::Duration interval() const override {
    return std::min(inner_->interval(), session_->duration());
  }
  std::shared_ptr<probes::PeerProbe> ForPeer(const topology::Peer& peer) override {
    return Gate(inner_->ForPeer(peer), peer.name, std::string(topology::PathClassName(peer.path)));
  }
  std::vector<std::string> Targets() const override { return inner_->Targets(); }
  std::shared_ptr<probes::PeerProbe> ForTarget(const std::string& key) override {
    return Gate(inner_->ForTarget(key), key, "");
  }

 private:
  std::shared_ptr<probes::PeerProbe> Gate(std::shared_ptr<probes::PeerProbe> p,
                                          const std::string& target, const std::string& path) {
    if (!p) return p;
    int* rounds = session_->Register(std::string(inner_->name()), target, path);
    return std::make_shared<GatedProbe>(std::move(p), session_, rounds, inner_->loads_path());
  }

  std::shared_ptr<probes::ProbeKind> inner_;
  std::shared_ptr<Session> session_;
};

// What ProbeForReport hands to CostInputsOf: the latest discovered Pod list (probe loop only
// while the App runs; read after Run() returned).
struct Seen {
  bool listed = false;
  std::vector<topology::Peer> pods;
};

std::string UtcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A report file (--input, --baseline) as hostile input: only a regular file, at most
// report::kMaxReportBytes (the configuration's reader: a directory, a FIFO or a device is
// refused, never waited on), then FromJson, which refuses every value outside its meaning.
std::optional<report::Report> ReadReport(const std::string& path, std::ostream& err) {
  // The path as the user gave it, but with no control character reaching the terminal.
  std::string shown = topology::SafeText(path, 4096);
  std::string error;
  auto text = config::ReadRegularFile(path, report::kMaxReportBytes, &error);
  if (!text) {
    err << "podnet-exporter: report: cannot read " << shown << ": " << error << "\n";
    return std::nullopt;
  }
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) {
    err << "podnet-exporter: report: " << shown << ": not JSON\n";
    return std::nullopt;
  }
  auto r = report::FromJson(j, &error);
  if (!r) err << "podnet-exporter: report: " << shown << ": " << error << "\n";
  return r;
}

// What the run is, before it starts: who probes, which build, when, for how long, and the kinds
// configured.
report::RunInfo RunInfoOf(const Options::Report& o, const config::Config& config) {
  report::RunInfo run;
  run.self_name = config.self.name;
  run.self_node = config.self.node;
  run.self_zone = config.self.zone;
  run.version = std::string(kVersion) + " (revision " + kRevision + ")";
  run.started = UtcNow();
  run.duration_seconds = std::chrono::duration<double>(o.duration).count();
  run.price_usd_per_gb = o.price_per_gb;
  run.configured = config::EnabledProbes(config);
  return run;
}

// Every kind's interval capped at `duration` in the configuration itself, so that what a kind
// derives from it (the burst kind's start jitter, a tenth of it) scales down too; the daemon's
// intervals go to run.interval_seconds for the cost projection.
void CapIntervals(config::Config& capped, config::Duration duration, report::RunInfo& run) {
  for (const auto& section : config::kProbeSections) {
    config::Duration* interval = section.interval(capped);
    if (interval == nullptr) continue;
    run.interval_seconds[std::string(section.key)] =
        std::chrono::duration<double>(*interval).count();
    *interval = std::min(*interval, duration);
  }
  // The report measures the amplification itself, wherever it runs: the DNS sample is for the
  // daemons (a report's Pod is not one of them, so it would never be drawn). The cost
  // projection reads the sample from the configuration as given.
  if (capped.dns) capped.dns->sample.reset();
}

// Runs every configured probe of `config` for --duration (an App that binds no listener) and
// builds *rep from what they recorded; the App's exit code when it is not 0.
int ProbeForReport(const Options& options, const config::Config& config, report::Report* rep) {
  const auto& o = options.report;
  report::RunInfo run = RunInfoOf(o, config);
  auto capped = std::make_shared<config::Config>(config);
  CapIntervals(*capped, o.duration, run);
  App app(options, capped);
  // A burst round's bound: per stream count, its start jitter (a tenth of the capped
  // interval), its data phase and one step timeout.
  config::Duration burst_round{};
  if (capped->burst) {
    const auto& b = *capped->burst;
    burst_round =
        static_cast<int>(b.streams.size()) * (b.interval / 10 + b.duration + b.step_timeout);
  }
  auto session = std::make_shared<Session>(o.duration, burst_round, [&app] { app.Stop(); });
  auto seen = std::make_shared<Seen>();
  app.SetBoundedRun({[&](std::shared_ptr<probes::ProbeKind> kind) {
                       // A kind this function does not cap (a newer one): the wrapper does.
                       run.interval_seconds.emplace(
                           std::string(kind->name()),
                           std::chrono::duration<double>(kind->interval()).count());
                       return std::make_shared<GatedKind>(std::move(kind), session);
                     },
                     [session](boost::asio::io_context& io) { session->Begin(io); },
                     [seen](const std::vector<topology::Peer>& pods) {
                       if (pods.empty()) return;  // before the first list, or none ready
                       seen->listed = true;
                       seen->pods = pods;
                     }});
  spdlog::info("report: probing for {} s", run.duration_seconds);
  int rc = app.Run();
  session->Release();
  if (rc != 0) return rc;
  run.targets = session->Targets();
  run.cluster_cost = CostInputsOf(config, seen->listed ? &seen->pods : nullptr, o.price_per_gb);
  *rep = report::Build(app.metrics().registry().Collect(), std::move(run));
  return 0;
}

}  // namespace

int RunReport(const Options& options, std::shared_ptr<const config::Config> config,
              std::ostream& out, std::ostream& err) {
  const auto& o = options.report;
  std::optional<report::Report> baseline;
  if (!o.baseline.empty() && !(baseline = ReadReport(o.baseline, err))) return 2;
  report::Report rep;
  if (!o.input.empty()) {
    auto saved = ReadReport(o.input, err);
    if (!saved) return 2;
    rep = std::move(*saved);
  } else if (int rc = ProbeForReport(options, *config, &rep); rc != 0) {
    return rc;
  }
  report::Verdict verdict;
  if (baseline) {
    report::Compare(rep, *baseline);
    verdict = report::VerdictOf(rep);
  }
  using Format = Options::Report::Format;
  if (o.format == Format::kJson) {
    out << report::ToJson(rep).dump(2) << "\n";
  } else if (o.format == Format::kHtml) {
    out << report::ToHtml(rep);
  } else {
    out << report::ToMarkdown(rep);
  }
  out.flush();
  for (const auto& f : rep.failures) {
    err << "podnet-exporter: report: probe failed: " << f.probe << " -> " << f.target << ": "
        << f.reason << "\n";
  }
  // The verdict on stderr too: a CI job's log shows it whatever it does with the report.
  if (baseline) err << "podnet-exporter: report: verdict: " << verdict.line << "\n";
  if (!rep.failures.empty()) return 1;
  if (!o.fail_on_change) return 0;
  // Fails closed: "no change" only where everything either side shows was compared.
  return !verdict.changed.empty() ? 3 : !verdict.complete ? 4 : 0;
}

}  // namespace podnet::app
