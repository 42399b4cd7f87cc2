#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "exporter/log/logging.h"
#include "exporter/net/address.h"

namespace podnet::app {

/// What the command line asked for (Prometheus flag conventions: `--flag=value` or
/// `--flag value`; docs/design.md, "Command line").
struct Options {
  enum class Mode { kRun, kCheckConfig, kVersion, kHelp, kDnsExplain, kReport };
  Mode mode = Mode::kRun;
  std::string config_file;
  std::optional<net::HostPort> listen_address;  // --web.listen-address overrides the file's
  std::string web_config_file;                  // --web.config.file; "" = plain HTTP, no auth
  /// --config.auto-reload-interval: how often the configuration file is read and, when its
  /// bytes changed, reloaded (as SIGHUP does); 0 = never (the default). A mounted ConfigMap
  /// changes under a running Pod this way (the kubelet swaps a symlink).
  std::chrono::nanoseconds config_auto_reload_interval{0};
  /// --shutdown.drain-period: after SIGTERM, how long /-/ready says "stopping" while the
  /// responders keep answering peers (their lists drop this Pod meanwhile), before the process
  /// stops; 0 = stop at once (the default). Not 0 and the peers read from the DNS records: at
  /// least KubernetesWatches::PeersStaleness. A second SIGTERM or SIGINT stops at once.
  std::chrono::nanoseconds shutdown_drain_period{0};
  spdlog::level::level_enum log_level = spdlog::level::info;
  log::Format log_format = log::Format::kLogfmt;
  std::optional<std::string> kubeconfig;  // --kubeconfig, else $KUBECONFIG, else in-cluster
  /// Where the in-cluster service-account token and CA are (not a flag: tests point it
  /// elsewhere).
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  // dns-explain NAME [--resolv-conf=PATH] [--resolver=glibc|musl]
  std::string dns_name;
  std::string resolv_conf = "/etc/resolv.conf";
  std::string resolver;  // "glibc" or "musl"; empty: both
  // report [--config.file=PATH] [--duration=60s] [--format=markdown|json|html] [--baseline=FILE]
  //        [--price-per-gb=USD] [--input=FILE] (report_run.h)
  struct Report {
    std::chrono::nanoseconds duration = std::chrono::seconds(60);  // rounds start within it
    enum class Format { kMarkdown, kJson, kHtml } format = Format::kMarkdown;  // --format
    bool fail_on_change = false;  // --fail-on-change: exit 3 when the verdict names a change
    std::string baseline;         // an earlier --format=json report; "" = none
    std::string input;            // print this saved report instead of probing; "" = probe
    double price_per_gb = 0.02;   // USD per GB (10^9 bytes) crossing a zone, both ends
  } report;
};

/// Parses argv[1..]. Returns std::nullopt and sets *error on an unknown flag, a missing value,
/// a bad --log.level / --log.format / --web.listen-address (net::ParseHostPort), or a missing
/// --config.file (exit code 2 for the caller).
std::optional<Options> ParseCommandLine(const std::vector<std::string>& args, std::string* error);

/// The --help text.
std::string Usage();

}  // namespace podnet::app
