#include "exporter/app/app.h"

#include <chrono>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "exporter/discovery/static_peers.h"
#include "exporter/probes/registry.h"
#include "podnet/version.h"

namespace podnet::app {
namespace {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// 75 bytes, like the reference run's echo server: small enough that a request's latency is the
// network's and the server's, not the transfer's.
constexpr char kEchoBody[] =
    "podnet-exporter echo: this body is a fixed 75 bytes for the latency probes\n";
static_assert(sizeof kEchoBody - 1 == 75);

std::string LandingPage() {
  return std::string(R"(<!doctype html>
<html><head><title>podnet-exporter</title></head>
<body>
<h1>podnet-exporter</h1>
<p>Pod-to-Pod network latency by path class, version )") +
         kVersion + R"(.</p>
<ul>
<li><a href="/metrics">/metrics</a></li>
<li><a href="/podnet/info">/podnet/info</a></li>
<li><a href="/-/healthy">/-/healthy</a> and <a href="/-/ready">/-/ready</a></li>
<li>/-/reload (POST) reloads the configuration</li>
<li><a href="/echo">/echo</a> is the peers' latency target</li>
</ul>
</body></html>
)";
}

}  // namespace

App::App(Options options, std::shared_ptr<const config::Config> config)
    : options_(std::move(options)), config_(std::move(config)) {
  metrics_.SetReloadOutcome(true, UnixNow());
}

App::~App() = default;

void App::Stop() {
  serve_io_.stop();
  probe_io_.stop();
}

int App::Run() {
  std::shared_ptr<const config::Config> config;
  {
    std::lock_guard lock(config_mu_);
    config = config_;
  }
  net::HostPort listen = config->listen_address;
  if (options_.listen_address) {
    std::string err;
    auto hp = net::ParseHostPort(*options_.listen_address, &err);
    if (!hp) {
      spdlog::error("--web.listen-address: {}", err);
      return 2;
    }
    listen = *hp;
  }
  try {
    http_ = std::make_unique<responders::HttpServer>(
        serve_io_, listen, [this](const responders::HttpRequest& r) { return Route(r); });
  } catch (const boost::system::system_error& e) {
    spdlog::error("cannot listen for HTTP on {} (listen_address / --web.listen-address): {}",
                  net::FormatHostPort(listen.address, listen.port), e.code().message());
    return 1;
  }
  try {
    udp_echo_ = std::make_unique<responders::UdpEchoResponder>(
        serve_io_, config->udp_echo_listen_address, metrics_.registry());
    if (config->burst_responder) {
      burst_ = std::make_unique<responders::BurstResponder>(*config->burst_responder,
                                                            metrics_.registry());
      spdlog::info("burst responder (iperf3-compatible) listening on {}",
                   net::FormatHostPort(config->burst_responder->listen_address.address,
                                       burst_->port()));
    }
  } catch (const boost::system::system_error& e) {
    spdlog::error("cannot listen for UDP echo on {} (responders.udp_echo.listen_address): {}",
                  net::FormatHostPort(config->udp_echo_listen_address.address,
                                      config->udp_echo_listen_address.port),
                  e.code().message());
    return 1;
  }
#ifdef PODNET_WITH_GRPC
  if (config->grpc_listen_address) {
    try {
      grpc_health_ = std::make_unique<responders::GrpcHealthServer>(*config->grpc_listen_address);
    } catch (const std::runtime_error& e) {
      spdlog::error("cannot listen: {}", e.what());
      return 1;
    }
    spdlog::info("listening on {} (gRPC health)",
                 net::FormatHostPort(config->grpc_listen_address->address, grpc_health_->port()));
  }
#endif
  spdlog::info("listening on {} (HTTP) and {} (UDP echo)",
               net::FormatHostPort(listen.address, http_->port()),
               net::FormatHostPort(config->udp_echo_listen_address.address, udp_echo_->port()));

  probe_env_ = std::make_unique<probes::ProbeEnv>(probes::ProbeEnv{probe_io_, metrics_, {}});
  scheduler_ = std::make_unique<scheduler::Scheduler>(probe_io_);
  boost::asio::post(probe_io_, [this, config] { Apply(config); });

  boost::asio::signal_set signals(serve_io_, SIGHUP, SIGINT, SIGTERM);
  std::function<void(boost::system::error_code, int)> on_signal =
      [&](boost::system::error_code ec, int sig) {
        if (ec) return;
        if (sig == SIGHUP) {
          std::string err;
          Reload(&err);
          signals.async_wait(on_signal);
          return;
        }
        spdlog::info("received signal {}, stopping", sig);
        Stop();
      };
  signals.async_wait(on_signal);

  auto probe_work = boost::asio::make_work_guard(probe_io_);
  std::thread probe_thread([this] { probe_io_.run(); });
  ready_ = true;
  serve_io_.run();

  probe_io_.stop();
  probe_thread.join();
  ready_ = false;
  return 0;
}

bool App::Reload(std::string* error) {
  auto result = config::LoadFile(options_.config_file, config::ProcessEnv());
  for (const auto& w : result.warnings) spdlog::warn("reload: {}", w.ToString());
  if (!result.ok()) {
    std::string all;
    for (const auto& e : result.errors) {
      spdlog::error("reload failed, keeping the running configuration: {}", e.ToString());
      all += e.ToString() + "\n";
    }
    metrics_.SetReloadOutcome(false, UnixNow());
    *error = all;
    return false;
  }
  std::shared_ptr<const config::Config> previous;
  {
    std::lock_guard lock(config_mu_);
    previous = config_;
    config_ = result.config;
  }
  if (previous->listen_address.address != result.config->listen_address.address ||
      previous->listen_address.port != result.config->listen_address.port ||
      previous->udp_echo_listen_address.port != result.config->udp_echo_listen_address.port ||
      previous->udp_echo_listen_address.address !=
          result.config->udp_echo_listen_address.address) {
    spdlog::warn("reload: listen addresses are kept until a restart");
  }
  boost::asio::post(probe_io_, [this, next = result.config] { Apply(next); });
  metrics_.SetReloadOutcome(true, UnixNow());
  spdlog::info("configuration reloaded from {}", options_.config_file);
  return true;
}

void App::Apply(std::shared_ptr<const config::Config> next) {
  auto peers = discovery::StaticPeers(*next);
  const config::Config* prev = applied_.get();
  bool labels_changed = prev == nullptr || prev->self != next->self ||
                        prev->aggregate_peers != next->aggregate_peers;
  if (labels_changed) {
    // Every series carries source labels (and the peer labels aggregate_peers picks): all
    // probes restart under the new label set, removing their old series first.
    for (const auto& kind : probes::ProbeKinds()) scheduler_->SetKind(kind.name, nullptr, {});
    probe_env_->self = next->self;
    probe_env_->peer_labels = metrics::PeerLabelSetFor(*next);
    for (const auto& kind : probes::ProbeKinds()) {
      scheduler_->SetKind(kind.name, kind.make(*next, *probe_env_), peers);
    }
  } else {
    auto diff = topology::Diff(peers_, peers);
    scheduler_->UpdatePeers(diff);
    for (const auto& kind : probes::ProbeKinds()) {
      if (kind.changed(*prev, *next)) {
        scheduler_->SetKind(kind.name, kind.make(*next, *probe_env_), peers);
      }
    }
    if (!diff.added.empty() || !diff.removed.empty()) {
      spdlog::info("peers: {} added, {} removed, {} kept", diff.added.size(),
                   diff.removed.size(), diff.kept.size());
    }
  }
  metrics_.SetPeers(peers);
  peers_ = std::move(peers);
  applied_ = std::move(next);
  spdlog::info("probing {} peers ({} probe schedules)", peers_.size(), scheduler_->size());
}

responders::HttpResponse App::Route(const responders::HttpRequest& req) {
  std::string path = req.target.substr(0, req.target.find('?'));
  bool get = req.method == "GET" || req.method == "HEAD";
  if (path == "/metrics") {
    if (!get) return {405, "text/plain; charset=utf-8", "Only GET or HEAD requests allowed.\n"};
    if (req.accepts_gzip) {
      return {200, "text/plain; version=0.0.4; charset=utf-8",
              metrics_.Serialize(metrics::Metrics::Encoding::kGzip), "gzip"};
    }
    return {200, "text/plain; version=0.0.4; charset=utf-8", metrics_.Serialize()};
  }
  if (path == "/echo" && (get || req.method == "POST")) {
    return {200, "text/plain; charset=utf-8", kEchoBody};
  }
  if (path == "/-/healthy" && get) return {200, "text/plain; charset=utf-8", "Healthy.\n"};
  if (path == "/-/ready" && get) {
    if (ready_) return {200, "text/plain; charset=utf-8", "Ready.\n"};
    return {503, "text/plain; charset=utf-8", "Not ready.\n"};
  }
  if (path == "/-/reload") {
    if (req.method != "POST" && req.method != "PUT") {
      return {405, "text/plain; charset=utf-8", "Only POST or PUT requests allowed.\n"};
    }
    std::string err;
    if (Reload(&err)) return {200, "text/plain; charset=utf-8", "Reloaded.\n"};
    return {500, "text/plain; charset=utf-8", "reload failed, running configuration kept:\n" + err};
  }
  if (path == "/podnet/info" && get) {
    std::shared_ptr<const config::Config> c;
    {
      std::lock_guard lock(config_mu_);
      c = config_;
    }
    nlohmann::json j{{"name", c->self.name},   {"node", c->self.node},
                     {"zone", c->self.zone},   {"version", kVersion},
                     {"revision", kRevision}};
    return {200, "application/json", j.dump() + "\n"};
  }
  if (path == "/" && get) return {200, "text/html; charset=utf-8", LandingPage()};
  return {404, "text/plain; charset=utf-8", "404 page not found\n"};
}

}  // namespace podnet::app
