#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>

#include "exporter/app/cli.h"
#include "exporter/app/control_loop.h"
#include "exporter/app/probe_loop.h"
#include "exporter/app/responder_loop.h"
#include "exporter/config/config.h"
#include "exporter/metrics/metrics.h"
#include "exporter/probes/probe.h"
#include "exporter/web/web_config.h"

namespace podnet::app {

/// The running exporter: three event loops, each a class that owns its state and is reached
/// from the others only by posting to it — ProbeLoop, ControlLoop (on the thread that calls
/// Run()) and ResponderLoop (docs/design.md, "Thread model"). App composes them.
class App {
 public:
  /// `config` has been loaded and validated already (main does it to exit 2 on problems).
  /// `web`: the --web.config.file (TLS, basic auth, headers); null for plain HTTP.
  App(Options options, std::shared_ptr<const config::Config> config,
      std::shared_ptr<const web::WebConfig> web = nullptr);
  ~App();

  /// Binds the listeners, starts the loops and blocks until SIGINT/SIGTERM or Stop().
  /// Returns the process exit code (1 when a listener cannot be bound, 2 when the TLS
  /// certificates or the Kubernetes credentials cannot be loaded).
  int Run();

  /// Asks Run() to return (thread-safe).
  void Stop();

  /// How `podnet-exporter report` runs the exporter (report_run.h): no listener is bound (the
  /// report only probes), every probe kind goes through `wrap` before the scheduler gets it,
  /// and `start` runs on the probe loop once it turns. Set before Run().
  struct BoundedRun {
    std::function<std::shared_ptr<probes::ProbeKind>(std::shared_ptr<probes::ProbeKind>)> wrap;
    std::function<void(boost::asio::io_context& probe_io)> start;
    /// On the probe loop: every discovered probe Pod (peers.kubernetes, self included when
    /// listed), at each change; empty before the first list. Null: not wanted.
    std::function<void(const std::vector<topology::Peer>&)> discovered = nullptr;
  };
  void SetBoundedRun(BoundedRun run) { bounded_ = std::move(run); }

  /// The registry the probes record into (read it after Run() returned).
  metrics::Metrics& metrics() { return metrics_; }

  /// Re-reads the configuration file. On success the new configuration is applied; on failure
  /// the running one is kept. Both set podnet_config_last_reload_successful. Control loop only.
  bool Reload(std::string* error) { return control_.Reload(error); }

 private:
  Options options_;
  BoundedRun bounded_;  // `report`: set, no listeners
  metrics::Metrics metrics_;
  // Destroyed in the reverse order: the control loop first (what it holds may answer requests
  // of the responder loop's connections), the probe loop last.
  ProbeLoop probe_;
  ResponderLoop responder_;
  ControlLoop control_;
};

}  // namespace podnet::app
