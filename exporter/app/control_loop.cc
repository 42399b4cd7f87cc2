#include "exporter/app/control_loop.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <utility>

#include "exporter/app/early_signals.h"
#include "exporter/app/info.h"
#include "exporter/config/read_file.h"
#include "exporter/log/last_chance.h"
#include "exporter/metrics/protobuf.h"
#include "exporter/runtime/loop_role.h"

namespace podnet::app {
namespace {

// nice(2) of the control loop's thread, against 0 for the responder and probe loops.
constexpr int kControlNice = 10;

// How often the TLS certificate files are looked at for changes.
constexpr auto kTlsRefreshInterval = std::chrono::seconds(2);

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

ControlLoop::ControlLoop(const Options& options, std::shared_ptr<const config::Config> config,
                         std::shared_ptr<const web::WebConfig> web, metrics::Metrics& metrics,
                         ProbeLoop& probe, ResponderLoop& responder)
    : config_file_(options.config_file),
      config_(std::move(config)),
      web_(std::move(web)),
      metrics_(metrics),
      probe_(probe),
      responder_(responder),
      watches_(io_, options.kubeconfig, options.service_account_dir, metrics.registry(), probe,
               [this] { UpdateReady(); }),
      config_watch_interval_(options.config_auto_reload_interval),
      drain_period_(options.shutdown_drain_period) {
  metrics_.SetReloadOutcome(true, UnixNow());
  config_seen_ = ReadForWatch();
}

std::string ControlLoop::ReadForWatch() const {
  std::string err;
  auto bytes = config::ReadRegularFile(config_file_, config::kMaxFileBytes, &err);
  // Not a YAML file's bytes (a NUL first): an unreadable file is a state of its own, so the
  // change to it, and from it back to the same good bytes, are both changes.
  return bytes ? std::move(*bytes) : std::string(1, '\0') + "unreadable: " + err;
}

ControlLoop::~ControlLoop() = default;

bool ControlLoop::LoadTls(std::shared_ptr<web::TlsContextSource>* tls) {
  if (!web_ || !web_->tls) return true;
  try {
    tls_ = std::make_shared<web::TlsContextSource>(web_->tls);
  } catch (const std::exception& e) {
    spdlog::error("{}: tls_server_config: {}", web_->file, e.what());
    return false;
  }
  *tls = tls_;
  return true;
}

void ControlLoop::CatchSignals() {
  signals_.emplace(io_, SIGHUP, SIGINT, SIGTERM);
  PinSignalHandlers();  // destroying signals_ later must not put SIG_DFL back
  WaitForSignal();
  if (tls_) ArmTlsRefresh();
  if (config_watch_interval_ > std::chrono::nanoseconds(0)) ArmConfigWatch();
  // A SIGHUP that came while we were starting (main() made it harmless) may mean the file
  // changed after we read it: reload once, now that the loop's handler is in place.
  if (TakeEarlyReload()) {
    boost::asio::post(io_, [this] {
      std::string err;
      Reload(&err);
    });
  }
}

void ControlLoop::Run() {
  running_ = true;
  UpdateReady();
  {
    runtime::BindLoop bind(runtime::Loop::kControl);
    // The control loop's work (a scrape's collection and text, a reload, a relist's JSON) can
    // take a core for tens of milliseconds. At a lower priority than the responder and probe
    // threads (nice is per thread on Linux, sched(7); raising it needs no privilege), the kernel
    // runs those first when they wake, so a peer's echo does not queue behind a scrape for CPU
    // either. Threads this thread starts from now on inherit it.
    if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kControlNice) != 0) {
      spdlog::debug("control loop: setpriority: {}", std::strerror(errno));
    }
    log::RunOrExit("control", [this] { io_.run(); });
  }
  running_ = false;
  UpdateReady();
  watches_.Stop();
  tls_refresh_.cancel();
  config_watch_.cancel();
  drain_.cancel();
  // asio's handler stays (PinSignalHandlers): a SIGHUP or a second SIGTERM while the other
  // loops stop is written to asio's pipe and read by no one, so the process exits 0.
  signals_.reset();
}

void ControlLoop::WaitForSignal() {
  signals_->async_wait([this](boost::system::error_code ec, int sig) {
    if (ec) return;
    if (sig == SIGHUP) {
      std::string err;
      Reload(&err);
      WaitForSignal();
      return;
    }
    if (sig == SIGTERM && !draining_ && drain_period_ > std::chrono::nanoseconds(0)) {
      // Kubernetes removes a terminating Pod from the EndpointSlices while it runs; peers
      // still probing it until their watch drops it get answers, not loss. Peers that read
      // the DNS records drop it later (a refresh and a cached answer): the drain covers that.
      std::chrono::nanoseconds period =
          std::max(drain_period_, std::chrono::nanoseconds(watches_.PeersStaleness()));
      spdlog::info(
          "received signal {}, stopping in {} ms: /-/ready fails meanwhile, peers "
          "are still answered",
          sig, std::chrono::duration_cast<std::chrono::milliseconds>(period).count());
      draining_ = true;
      UpdateReady();
      drain_.expires_after(period);
      drain_.async_wait([this](boost::system::error_code ec) {
        if (!ec) Stop();
      });
      WaitForSignal();  // a second SIGTERM, or SIGINT, stops at once
      return;
    }
    spdlog::info("received signal {}, stopping", sig);
    Stop();
  });
}

void ControlLoop::ArmTlsRefresh() {
  tls_refresh_.expires_after(kTlsRefreshInterval);
  tls_refresh_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    std::string err;
    if (tls_->Refresh(&err)) {
      spdlog::info("TLS: certificate files changed; new connections use them");
    } else if (!err.empty()) {
      spdlog::error(
          "TLS: certificate files changed but cannot be used, keeping the previous ones: {}", err);
    }
    ArmTlsRefresh();
  });
}

void ControlLoop::ArmConfigWatch() {
  config_watch_.expires_after(config_watch_interval_);
  config_watch_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    // The kubelet swaps a ConfigMap's files in one rename: a file that became unreadable
    // (removed, too big, a FIFO) is a change too, and fails the reload like a bad file.
    if (ReadForWatch() != config_seen_) {
      spdlog::info("configuration file {} changed: reloading", config_file_);
      std::string err;
      Reload(&err);
    }
    ArmConfigWatch();
  });
}

bool ControlLoop::Reload(std::string* error) {
  PODNET_DCHECK_NOT_LOOP(kResponder);
  config_seen_ = ReadForWatch();  // what this reload saw: the watch reloads only after a change
  auto result = config::LoadFile(config_file_, config::ProcessEnv());
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
  // Discovery first: credentials that cannot be read fail the reload like a bad file does,
  // and keep the running configuration (and discovery) — otherwise a reload reported as
  // successful would leave the Pod without its Kubernetes peers.
  if (std::string err; !watches_.Configure(*result.config, &err)) {
    spdlog::error("reload failed, keeping the running configuration: peers.kubernetes: {}", err);
    metrics_.SetReloadOutcome(false, UnixNow());
    *error = "peers.kubernetes: " + err + "\n";
    return false;
  }
  auto previous = std::exchange(config_, result.config);
  if (previous->listen_address.address != config_->listen_address.address ||
      previous->listen_address.port != config_->listen_address.port ||
      previous->udp_echo_listen_address.port != config_->udp_echo_listen_address.port ||
      previous->udp_echo_listen_address.address != config_->udp_echo_listen_address.address) {
    spdlog::warn("reload: listen addresses are kept until a restart");
  }
  probe_.Apply(config_);
  metrics_.SetReloadOutcome(true, UnixNow());
  spdlog::info("configuration reloaded from {}", config_file_);
  return true;
}

void ControlLoop::RunReload(ReloadPacer::Batch batch) {
  boost::asio::post(io_,
                    [this, batch = std::move(batch)]() mutable { ReloadBatch(std::move(batch)); });
}

void ControlLoop::ReloadBatch(ReloadPacer::Batch batch) {
  PODNET_DCHECK_LOOP(kControl);
  responders::HttpResponse resp{200, "text/plain; charset=utf-8", "Reloaded.\n"};
  try {
    if (std::string err; !Reload(&err)) {
      resp = {500, "text/plain; charset=utf-8",
              "reload failed, running configuration kept:\n" + err};
    }
  } catch (const std::exception& e) {
    spdlog::error("reload failed: {}", e.what());
    resp = {500, "text/plain; charset=utf-8", "internal error\n"};
  }
  for (auto& respond : batch) respond(resp);
  responder_.ReloadFinished();
}

void ControlLoop::Serve(responders::HttpRequest req, HttpRouteId route,
                        responders::HttpRespond respond) {
  boost::asio::post(io_,
                    [this, req = std::move(req), route, respond = std::move(respond)]() mutable {
                      if (route == HttpRouteId::kMetrics) {
                        QueueScrape(req.accepts_gzip, req.accepts_protobuf, std::move(respond));
                        return;
                      }
                      respond(RouteControlGuarded(req, route));
                    });
}

void ControlLoop::QueueScrape(bool gzip, bool protobuf, responders::HttpRespond respond) {
  PODNET_DCHECK_LOOP(kControl);
  pending_scrapes_.push_back({gzip, protobuf, std::move(respond)});
  if (pending_scrapes_.size() == 1) boost::asio::post(io_, [this] { ServeScrapes(); });
}

void ControlLoop::ServeScrapes() {
  PODNET_DCHECK_LOOP(kControl);
  auto batch = std::move(pending_scrapes_);
  pending_scrapes_.clear();
  // [text, protobuf][identity, gzip]: each built once for the batch, when some scrape asks.
  std::shared_ptr<const std::string> bodies[2][2];
  for (auto& scrape : batch) {
    responders::HttpResponse resp{200,
                                  scrape.protobuf ? std::string(metrics::kProtobufContentType)
                                                  : "text/plain; version=0.0.4; charset=utf-8",
                                  ""};
    try {
      auto& body = bodies[scrape.protobuf][scrape.gzip];
      if (!body) {
        body = std::make_shared<const std::string>(metrics_.Serialize(
            scrape.gzip ? metrics::Metrics::Encoding::kGzip : metrics::Metrics::Encoding::kIdentity,
            scrape.protobuf ? metrics::Metrics::Format::kProtobuf
                            : metrics::Metrics::Format::kText));
      }
      resp.shared_body = body;
      resp.varies_by_accept = true;
      if (scrape.gzip) resp.content_encoding = "gzip";
    } catch (const std::exception& e) {
      spdlog::error("http: /metrics failed: {}", e.what());
      resp = {500, "text/plain; charset=utf-8", "internal error\n"};
    }
    scrape.respond(std::move(resp));
  }
}

responders::HttpResponse ControlLoop::RouteControlGuarded(const responders::HttpRequest& req,
                                                          HttpRouteId route) {
  try {
    return RouteControl(route);
  } catch (const std::exception& e) {
    spdlog::error("http: handler for {} failed: {}", req.target, e.what());
    return {500, "text/plain; charset=utf-8", "internal error\n"};
  }
}

responders::HttpResponse ControlLoop::RouteControl(HttpRouteId route) {
  PODNET_DCHECK_LOOP(kControl);
  if (route == HttpRouteId::kReady) {  // the responder loop answers "ready" itself: say why not
    std::string why = NotReadyReason();
    if (why.empty()) return {200, "text/plain; charset=utf-8", "Ready.\n"};
    return {503, "text/plain; charset=utf-8", "Not ready: " + why + ".\n"};
  }
  if (route == HttpRouteId::kInfo) {
    std::string zone = config_->self.zone;
    if (zone.empty()) zone = watches_.self_zone();
    return {200, "application/json", InfoJson(config_->self.name, config_->self.node, zone)};
  }
  return {404, "text/plain; charset=utf-8", "404 page not found\n"};
}

std::string ControlLoop::NotReadyReason() const {
  PODNET_DCHECK_LOOP(kControl);
  if (!running_) return "starting";
  if (draining_) return "stopping";
  return watches_.NotSyncedReason();
}

void ControlLoop::UpdateReady() {
  responder_.SetReady(running_ && !draining_ && watches_.synced());
}

}  // namespace podnet::app
