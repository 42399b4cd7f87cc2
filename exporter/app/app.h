#pragma once

#include <prometheus/counter.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "exporter/app/cli.h"
#include "exporter/app/reload_pacer.h"
#include "exporter/config/config.h"
#include "exporter/discovery/kubernetes/discovery.h"
#include "exporter/discovery/kubernetes/service_info.h"
#include "exporter/metrics/metrics.h"
#include "exporter/probes/probe.h"
#include "exporter/probes/registry.h"
#include "exporter/responders/burst_server.h"
#include "exporter/responders/grpc_health.h"
#include "exporter/responders/http_server.h"
#include "exporter/responders/responder_metrics.h"
#include "exporter/responders/udp_echo.h"
#include "exporter/runtime/bounded_worker.h"
#include "exporter/scheduler/scheduler.h"
#include "exporter/topology/topology.h"
#include "exporter/web/auth_gate.h"
#include "exporter/web/tls_context.h"
#include "exporter/web/web_config.h"

namespace podnet::app {

/// The running exporter: three event loops, each on its own thread, so that neither serving nor
/// the exporter's own chores disturb what is measured (docs/design.md, "Thread model";
/// runtime/loop_role.h; README, "Architecture"):
///  - the responder loop answers what peers time: the UDP echo responder and the HTTP server's
///    sockets. /echo, /-/healthy, /-/ready and / are answered on it; nothing else runs there;
///  - the control loop (the thread that called Run()): /metrics bodies (collection,
///    serialization, gzip), /-/reload, /podnet/info, signals (SIGHUP reload, SIGINT/SIGTERM stop),
///    configuration reloads and Kubernetes discovery. The HTTP server hands those requests to it
///    (Route posts them) and the finished response is written back on the responder loop;
///  - the probe loop: the scheduler and every probe.
/// The burst responder and the gRPC health responder have threads of their own, and so do
/// bcrypt checks with basic auth (auth_worker_, SCHED_IDLE; the responder loop decides which
/// run: web/auth_gate.h).
/// A configuration is parsed and validated on the control loop, then handed to the probe loop
/// as a whole (std::shared_ptr<const Config>); a bad one never reaches it.
/// With peers.kubernetes, Kubernetes discovery runs on the control loop and posts every
/// change (own zone, candidates) to the probe loop. A configuration and a discovery change take
/// the same path there (Reconcile): compose the static and the selected Kubernetes peers
/// (topology::ComposePeers), diff against the running peers, start and stop only what changed.
class App {
 public:
  /// `config` has been loaded and validated already (main does it to exit 2 on problems).
  /// `web`: the --web.config.file (TLS, basic auth, headers); null for plain HTTP.
  App(Options options, std::shared_ptr<const config::Config> config,
      std::shared_ptr<const web::WebConfig> web = nullptr);
  ~App();

  /// Binds the listeners, starts both loops and blocks until SIGINT/SIGTERM or Stop().
  /// Returns the process exit code (1 when a listener cannot be bound).
  int Run();

  /// Asks Run() to return (thread-safe).
  void Stop();

  /// How `podnet-exporter report` runs the exporter (report_run.h): no listener is bound (the
  /// report only probes), every probe kind goes through `wrap` before the scheduler gets it,
  /// and `start` runs on the probe loop once it turns. Set before Run().
  struct BoundedRun {
    std::function<std::shared_ptr<probes::ProbeKind>(std::shared_ptr<probes::ProbeKind>)> wrap;
    std::function<void(boost::asio::io_context& probe_io)> start;
  };
  void SetBoundedRun(BoundedRun run) { bounded_ = std::move(run); }

  /// The registry the probes record into (read it after Run() returned).
  metrics::Metrics& metrics() { return metrics_; }

  /// Re-reads the configuration file. On success the new configuration is applied; on failure
  /// the running one is kept. Both set podnet_config_last_reload_successful. Control loop only.
  bool Reload(std::string* error);

 private:
  // Responder loop: answers /echo, health and / at once; posts the rest to the control loop.
  void Route(responders::HttpRequest req, responders::HttpRespond respond);
  // Responder loop: a bcrypt check for `d` (AuthGate::Verdict::kCheck) on auth_worker_, then
  // RouteAuthorized or 401 back on the responder loop.
  void CheckCredentials(web::AuthGate::Decision d, responders::HttpRequest req, std::string path,
                        responders::HttpRespond respond);
  // Responder loop: the 401 or 429 for a request basic auth refused (`d`), counted.
  responders::HttpResponse AuthRefusal(const web::AuthGate::Decision& d);
  // Responder loop: Route's part after the TLS and basic auth checks.
  void RouteAuthorized(responders::HttpRequest req, std::string path,
                       responders::HttpRespond respond);
  // Control loop: /metrics. Scrapes that wait together are answered from one body per
  // encoding (two Prometheus replicas, or a burst of clients, cost one serialization, and
  // their responses share its memory).
  void QueueScrape(bool gzip, responders::HttpRespond respond);
  void ServeScrapes();
  // Control loop: RouteControl, with an exception turned into a 500.
  responders::HttpResponse RouteControlGuarded(const responders::HttpRequest& req,
                                               const std::string& path);
  // Responder loop: queues a /-/reload request (reload_pacer_), or refuses it when too many
  // wait.
  void RequestReload(responders::HttpRespond respond);
  // Control loop: one paced reload for `batch`; then tells reload_pacer_ on the responder loop.
  void RunReload(ReloadPacer::Batch batch);
  // Control loop: /metrics, /podnet/info, /-/ready when not ready.
  responders::HttpResponse RouteControl(const responders::HttpRequest& req,
                                        const std::string& path);
  // Control loop: starts, restarts or stops Kubernetes discovery as `c` asks. False and *error
  // when it cannot start (no in-cluster credentials, a bad kubeconfig).
  bool ConfigureDiscovery(const config::Config& c, std::string* error);
  // Control loop, from ConfigureDiscovery: polls what the service probe's Kubernetes Services
  // ask for (podnet_service_info) while peers.kubernetes is set and a target names a Service.
  bool ConfigureServiceInfo(const config::Config& c, std::string* error);
  // An API client from --kubeconfig, else $KUBECONFIG (its first file), else the Pod's service
  // account; nullptr and *error when the credentials cannot be read.
  std::unique_ptr<discovery::kubernetes::ApiClient> MakeApiClient(std::string* error);
  // Control loop: "" when ready, else why not (for /-/ready's body): "starting", or the
  // Kubernetes discovery's first list not done yet and its last error.
  std::string NotReadyReason() const;
  // Runs `bind` (which creates one listener and returns its bound port) and logs the outcome:
  // "listening on ADDRESS (WHAT)", or one error line naming WHAT, the address, the config `key`
  // and the reason. False when it threw.
  static bool Listen(std::string_view what, std::string_view key, const net::HostPort& at,
                     const std::function<std::uint16_t()>& bind);
  // Probe loop only: the one path from (configuration, discovery snapshot) to running probes.
  void Reconcile(std::shared_ptr<const config::Config> next);
  // Probe loop only: probe_env_->dns_servers from the cluster DNS watch's endpoints, classified
  // from self_ and capped by probes.dns.cluster_dns.max_servers (topology::SpreadOverZones).
  void UpdateDnsServers();
  // Control loop: stops the cluster DNS watch (if any) and empties the DNS server list.
  void StopDnsDiscovery();
  // Probe loop: `entry`'s kind for `c` (nullptr when off), through bounded_.wrap when set.
  std::shared_ptr<probes::ProbeKind> MakeKind(const probes::ProbeKindEntry& entry,
                                              const config::Config& c);
  // Binds every listener `config` asks for; false when one cannot be bound (logged).
  bool BindListeners(const config::Config& config, const net::HostPort& listen);

  Options options_;
  BoundedRun bounded_;  // `report`: set, no listeners
  // The web configuration: read at start-up; certificates re-read on change (control loop).
  std::shared_ptr<const web::WebConfig> web_;
  std::shared_ptr<web::TlsContextSource> tls_;
  // With basic_auth_users: the decision per request (responder loop) and the one thread that
  // runs bcrypt checks (web/auth_gate.h: at most 2 a second, 4 queued; never on a loop).
  std::unique_ptr<web::AuthGate> auth_;
  // podnet_web_auth_failures_total{reason}, indexed by AuthGate::Verdict (kAllowed and
  // kCheck unused; kCheck's slot counts "wrong_credentials": a check that failed).
  std::vector<prometheus::Counter*> auth_failures_;
  struct PendingScrape {
    bool gzip;
    responders::HttpRespond respond;
  };
  std::vector<PendingScrape> pending_scrapes_;  // control loop
  metrics::Metrics metrics_;
  scheduler::SchedulerMetrics scheduler_metrics_{metrics_.registry()};
  // podnet_responder_requests_total{responder="http_echo",result="answered"}: /echo requests.
  prometheus::Counter& http_echo_answered_ =
      responders::ResponderRequests(metrics_.registry())
          .Add({{"responder", "http_echo"}, {"result", "answered"}});
  boost::asio::io_context control_io_;
  boost::asio::io_context respond_io_;
  boost::asio::io_context probe_io_;
  std::unique_ptr<runtime::BoundedWorker> auth_worker_;  // with auth_; jobs post to respond_io_

  std::mutex config_mu_;
  std::shared_ptr<const config::Config> config_;  // the running configuration

  // Probe-loop state.
  std::unique_ptr<probes::ProbeEnv> probe_env_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::shared_ptr<const config::Config> applied_;
  std::vector<topology::Peer> peers_;
  topology::Self self_;  // effective: config's self, zone from the Node when the config has none
  discovery::kubernetes::Snapshot discovered_;  // last snapshot posted by discovery
  std::vector<discovery::kubernetes::Endpoint> dns_discovered_;  // by the cluster DNS watch

  // Control-loop state: Kubernetes discovery, when peers.kubernetes is set.
  // Registered with the first peers.kubernetes, removed when a reload turns it off: a Pod
  // without Kubernetes discovery exports no podnet_kubernetes_* series.
  std::unique_ptr<discovery::kubernetes::DiscoveryMetrics> discovery_metrics_;
  std::unique_ptr<discovery::kubernetes::KubernetesDiscovery> discovery_;
  discovery::kubernetes::DiscoveryOptions discovery_options_;  // of the running discovery
  // The cluster DNS Service's watch (probes.dns.cluster_dns with peers.kubernetes): the same
  // list-then-watch on the same DiscoveryMetrics (resource="dns_endpointslices"). Its failures
  // are counted and logged only: peers and /-/ready never wait for it.
  std::unique_ptr<discovery::kubernetes::KubernetesDiscovery> dns_discovery_;
  discovery::kubernetes::DiscoveryOptions dns_discovery_options_;  // of the running DNS watch
  // What the probed Services ask for; destroyed before discovery_metrics_ (it counts there).
  std::unique_ptr<discovery::kubernetes::ServiceInfoPoller> service_info_;
  static constexpr std::chrono::seconds kServiceInfoInterval{60};

  // Responder-loop state: who answers, in every /echo response (proto/echo.h: kNodeHeader,
  // kZoneHeader) and UDP echo reply; set from the effective self_ by Reconcile.
  std::vector<std::pair<std::string, std::string>> echo_identity_headers_;

  std::unique_ptr<responders::HttpServer> http_;
  std::unique_ptr<responders::UdpEchoResponder> udp_echo_;
  std::unique_ptr<responders::BurstResponder> burst_;  // own thread (see burst_server.h)
#ifdef PODNET_WITH_GRPC
  std::unique_ptr<responders::GrpcHealthServer> grpc_health_;  // responders.grpc, if set
#endif
  std::atomic<bool> ready_{false};
  // Responder loop: /-/reload requests. A reload starts at most once a second; up to 16
  // requests wait meanwhile (more get 429) and all share the next reload (reload_pacer.h).
  std::unique_ptr<ReloadPacer> reload_pacer_;
  prometheus::Counter* reload_refused_ = nullptr;
  // Set on the control loop, read by /-/ready on the responder loop: discovery runs and has not
  // listed yet.
  std::atomic<bool> discovery_unsynced_{false};
};

}  // namespace podnet::app
