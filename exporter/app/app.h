#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "exporter/app/cli.h"
#include "exporter/config/config.h"
#include "exporter/discovery/kubernetes/discovery.h"
#include "exporter/metrics/metrics.h"
#include "exporter/probes/probe.h"
#include "exporter/responders/burst_server.h"
#include "exporter/responders/grpc_health.h"
#include "exporter/responders/http_server.h"
#include "exporter/responders/udp_echo.h"
#include "exporter/scheduler/scheduler.h"
#include "exporter/topology/topology.h"

namespace podnet::app {

/// The running exporter: two event loops, each on its own thread, so that serving never
/// disturbs probe timing (docs/design.md, "Thread model"):
///  - the serving loop: HTTP server (/metrics, health, reload, /echo, /podnet/info), the UDP echo
///    responder, signals (SIGHUP reload, SIGINT/SIGTERM stop) and configuration reloads;
///  - the probe loop: the scheduler and every probe.
/// A configuration is parsed and validated on the serving loop, then handed to the probe loop
/// as a whole (std::shared_ptr<const Config>); a bad one never reaches it.
/// With peers.kubernetes, Kubernetes discovery runs on the serving loop too and posts every
/// change (own zone, candidates) to the probe loop. A configuration and a discovery change take
/// the same path there (Reconcile): select the Kubernetes peers (topology::SelectPeers), add the
/// static ones, diff against the running peers, start and stop only what changed.
class App {
 public:
  /// `config` has been loaded and validated already (main does it to exit 2 on problems).
  App(Options options, std::shared_ptr<const config::Config> config);
  ~App();

  /// Binds the listeners, starts both loops and blocks until SIGINT/SIGTERM or Stop().
  /// Returns the process exit code (1 when a listener cannot be bound).
  int Run();

  /// Asks Run() to return (thread-safe).
  void Stop();

  /// Re-reads the configuration file. On success the new configuration is applied; on failure
  /// the running one is kept. Both set podnet_config_last_reload_successful. Serving loop only.
  bool Reload(std::string* error);

 private:
  responders::HttpResponse Route(const responders::HttpRequest& req);
  // Serving loop: starts, restarts or stops Kubernetes discovery as `c` asks. False and *error
  // when it cannot start (no in-cluster credentials, a bad kubeconfig).
  bool ConfigureDiscovery(const config::Config& c, std::string* error);
  bool Ready() const;  // serving loop
  // Probe loop only: the one path from (configuration, discovery snapshot) to running probes.
  void Reconcile(std::shared_ptr<const config::Config> next);

  Options options_;
  metrics::Metrics metrics_;
  boost::asio::io_context serve_io_;
  boost::asio::io_context probe_io_;

  std::mutex config_mu_;
  std::shared_ptr<const config::Config> config_;  // the running configuration

  // Probe-loop state.
  std::unique_ptr<probes::ProbeEnv> probe_env_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::shared_ptr<const config::Config> applied_;
  std::vector<topology::Peer> peers_;
  config::Self self_;  // effective: config's self, zone from the Node when the config has none
  discovery::kubernetes::Snapshot discovered_;  // last snapshot posted by discovery

  // Serving-loop state: Kubernetes discovery, when peers.kubernetes is set.
  discovery::kubernetes::DiscoveryMetrics discovery_metrics_;
  std::unique_ptr<discovery::kubernetes::KubernetesDiscovery> discovery_;
  discovery::kubernetes::DiscoveryOptions discovery_options_;  // of the running discovery

  std::unique_ptr<responders::HttpServer> http_;
  std::unique_ptr<responders::UdpEchoResponder> udp_echo_;
  std::unique_ptr<responders::BurstResponder> burst_;  // own thread (see burst_server.h)
#ifdef PODNET_WITH_GRPC
  std::unique_ptr<responders::GrpcHealthServer> grpc_health_;  // responders.grpc, if set
#endif
  std::atomic<bool> ready_{false};
};

}  // namespace podnet::app
