#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exporter/app/cli.h"
#include "exporter/app/http_routes.h"
#include "exporter/app/kubernetes_watches.h"
#include "exporter/app/probe_loop.h"
#include "exporter/app/reload_pacer.h"
#include "exporter/app/responder_loop.h"
#include "exporter/config/config.h"
#include "exporter/metrics/metrics.h"
#include "exporter/responders/http_server.h"
#include "exporter/web/tls_context.h"
#include "exporter/web/web_config.h"

namespace podnet::app {

/// The control loop (docs/design.md, "Thread model"), run by the thread that calls Run(): the
/// running configuration and its reloads (SIGHUP, and /-/reload paced by the responder loop),
/// /metrics bodies, /podnet/info and why /-/ready is not ready, signals, the TLS certificates'
/// refresh and Kubernetes discovery (KubernetesWatches). A configuration is parsed and
/// validated here, then handed to the probe loop whole (ProbeLoop::Apply); a bad one never
/// reaches it. Other threads reach it through Serve and RunReload, each of which posts to the
/// loop, and Stop.
class ControlLoop {
 public:
  /// `config` has been loaded and validated already; `web` is null for plain HTTP. The loops
  /// it posts to outlive it.
  ControlLoop(const Options& options, std::shared_ptr<const config::Config> config,
              std::shared_ptr<const web::WebConfig> web, metrics::Metrics& metrics,
              ProbeLoop& probe, ResponderLoop& responder);
  ~ControlLoop();

  /// The running configuration (control loop, or before Run()).
  std::shared_ptr<const config::Config> config() const { return config_; }
  /// The TLS certificates of the web configuration, loaded; null without tls_server_config.
  /// False (logged) when they cannot be loaded. Before Run().
  bool LoadTls(std::shared_ptr<web::TlsContextSource>* tls);
  /// Starts Kubernetes discovery as the running configuration asks. Before Run().
  bool StartDiscovery(std::string* error) { return watches_.Configure(*config_, error); }
  /// Takes SIGHUP, SIGINT and SIGTERM over from their early handlers (early_signals.h) and arms
  /// the TLS refresh. Before the other loops start serving: a SIGTERM to a process that answers
  /// /-/healthy must stop it cleanly (exit 0), never by the signal's default action. Once.
  void CatchSignals();
  /// Runs the loop on this thread until Stop() (or SIGINT/SIGTERM), then ends discovery's
  /// calls; Release() destroys it once the other loops are joined.
  void Run();
  void Stop() { io_.stop(); }  // thread-safe
  void Release() { watches_.Release(); }

  /// Re-reads the configuration file. On success the new configuration is applied; on failure
  /// the running one is kept. Both set podnet_config_last_reload_successful. Control loop only.
  bool Reload(std::string* error);

  // Thread-safe: each posts to the control loop.
  /// /metrics, /podnet/info or /-/ready while not ready (ResponderLoop::ControlHooks::serve:
  /// the responder loop has checked the path and method).
  void Serve(responders::HttpRequest req, HttpRouteId route, responders::HttpRespond respond);
  /// One reload for `batch`, then ResponderLoop::ReloadFinished (ControlHooks::reload).
  void RunReload(ReloadPacer::Batch batch);

 private:
  // /metrics. Scrapes that wait together are answered from one body per encoding (two
  // Prometheus replicas, or a burst of clients, cost one serialization, and their responses
  // share its memory).
  void QueueScrape(bool gzip, bool protobuf, responders::HttpRespond respond);
  void ServeScrapes();
  // RouteControl, with an exception turned into a 500.
  responders::HttpResponse RouteControlGuarded(const responders::HttpRequest& req,
                                               HttpRouteId route);
  // /podnet/info, /-/ready while not ready.
  responders::HttpResponse RouteControl(HttpRouteId route);
  // One paced reload for `batch`.
  void ReloadBatch(ReloadPacer::Batch batch);
  // "" when ready, else why not (for /-/ready's body): "starting", or the Kubernetes
  // discovery's first list not done yet and its last error.
  std::string NotReadyReason() const;
  // ResponderLoop::SetReady from running_ and discovery's first list.
  void UpdateReady();
  // SIGHUP reloads; SIGINT and SIGTERM stop (SIGTERM after the drain period, if any).
  void WaitForSignal();
  // Certificates re-read when their files change (cert-manager renewals, Secret updates).
  void ArmTlsRefresh();
  // --config.auto-reload-interval: the file read every interval, reloaded when its bytes
  // differ from the last ones read (a bad file is tried once per change, not every interval).
  void ArmConfigWatch();
  // The file's bytes, or a marker naming why it cannot be read (for the watch's comparison).
  std::string ReadForWatch() const;

  boost::asio::io_context io_;
  std::string config_file_;
  std::shared_ptr<const config::Config> config_;  // the running configuration
  std::shared_ptr<const web::WebConfig> web_;
  std::shared_ptr<web::TlsContextSource> tls_;
  metrics::Metrics& metrics_;
  ProbeLoop& probe_;
  ResponderLoop& responder_;
  KubernetesWatches watches_;
  struct PendingScrape {
    bool gzip;
    bool protobuf;
    responders::HttpRespond respond;
  };
  std::vector<PendingScrape> pending_scrapes_;
  std::optional<boost::asio::signal_set> signals_;  // from CatchSignals() to Run()'s end
  boost::asio::steady_timer tls_refresh_{io_};
  std::chrono::nanoseconds config_watch_interval_{0};
  std::chrono::nanoseconds drain_period_{0};  // --shutdown.drain-period
  bool draining_ = false;                     // SIGTERM came; stopping after drain_period_
  boost::asio::steady_timer drain_{io_};
  std::string config_seen_;  // ReadForWatch() at start and at the last reload
  boost::asio::steady_timer config_watch_{io_};
  bool running_ = false;  // Run() runs the loop
};

}  // namespace podnet::app
