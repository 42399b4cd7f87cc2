#include "exporter/app/cli.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <string_view>

#include "exporter/config/units.h"

namespace podnet::app {

namespace {

// The usage text: synopsis and the daemon's flags; then each command's paragraph; then the
// daemon's exit codes.
constexpr const char* kUsageFlags = R"(usage: podnet-exporter --config.file=PATH [flags]
       podnet-exporter --config.file=PATH --config.check
       podnet-exporter dns-explain NAME [--resolv-conf=PATH] [--resolver=glibc|musl]
       podnet-exporter report [--config.file=PATH] [--duration=60s]
                              [--format=markdown|json|html] [--baseline=FILE.json]
                              [--fail-on-change] [--price-per-gb=USD] [--input=FILE.json]
       podnet-exporter --version

Measures Pod-to-Pod network latency by path class (same_node, same_zone, cross_zone) and
exposes it for Prometheus on /metrics.

flags:
  --config.file=PATH             configuration file (YAML; ${VAR} expanded from the environment)
  --config.check                 validate the configuration, print every problem, exit 0 or 2
  --config.auto-reload-interval=DURATION
                                 re-read the configuration file this often and reload it when it
                                 changed, as SIGHUP does (at least 1s; default 0s: never)
  --shutdown.drain-period=DURATION
                                 after SIGTERM, keep answering peers this long with /-/ready
                                 failing, then stop (default 0s: stop at once); with peers
                                 found from DNS records, at least 1.1 x dns_refresh + 7s
  --web.listen-address=HOST:PORT overrides listen_address of the configuration (default :9479)
  --web.config.file=PATH         TLS, basic auth and headers for the HTTP port (exporter-toolkit's
                                 format; /echo, /-/healthy and /-/ready stay plain and open)
  --log.level=LEVEL              debug, info, warn or error (default info)
  --log.format=FORMAT            logfmt or json (default logfmt)
  --kubeconfig=PATH              Kubernetes client configuration outside a cluster (default
                                 $KUBECONFIG; unset: the Pod's service account, in-cluster)
  --version                      print the version and exit
  -h, --help                     print this help and exit

)";
constexpr const char* kUsageDnsExplain =
    R"(dns-explain: performs one lookup of NAME the way each C library would (glibc and musl, or the
one --resolver names) under the resolv.conf (default /etc/resolv.conf) and prints every question
it sends with the rule that sent it (dots vs ndots, the search list, retries), its answer and
timing, the result, and what a trailing dot or a lower ndots would cost in questions; with both,
a side-by-side summary. Exit codes: 0 the name was found, 1 it was not (by either C library:
NXDOMAIN, NODATA, SERVFAIL, timeout, refused, or a name it refuses to send), 2 bad flags.

)";
constexpr const char* kUsageReport =
    R"(report: one bounded run of every configured probe kind towards the configured (or discovered)
peers, then the tables: RTT per path class, HTTP keep-alive vs new connection, gRPC, bursts
with 1 and N streams, DNS questions per lookup, cross-zone bytes and cost. Probe rounds start
within --duration (default 60s; each kind's interval is capped at it, so every kind runs at
least once), then running rounds are waited for. Percentiles are left out ("n<N") below the
samples that carry them: p50 6, p90 29, p99 299. --format=json prints the versioned schema of
docs/design.md; --format=html one self-contained page (the latency ladder and the zone matrix
as inline SVG, then the tables; no network). --baseline=FILE.json starts with a one-line verdict (how many figures
changed beyond their run-to-run spread, the largest named) and shows each figure's change
against an earlier JSON report, marking with ! a change larger than either run's spread;
--fail-on-change (needs --baseline) makes such a change exit 3, and a comparison that is not
complete (a section, row or figure on one side only, or nothing compared) exit 4; --price-per-gb (default 0.02, as
the recording rules) prices cross-zone bytes; --input=FILE.json prints a saved report instead
of probing (with --baseline: compares two saved reports). --config.file defaults to
/etc/podnet-exporter/podnet.yaml. Exit codes: 0 every probe got answers (and, with
--fail-on-change, no change), 1 a probe failed (each named in the output and on stderr; before
3), 2 bad flags, configuration or baseline, 3 --fail-on-change and a change beyond the spread,
4 --fail-on-change and an incomplete comparison (after 3).

)";
constexpr const char* kUsageExit =
    R"(exit codes: 0 ok, 1 a listener cannot be bound, 2 bad flags or bad configuration.
SIGHUP or POST /-/reload reloads the configuration; a bad file keeps the running one.
)";

}  // namespace

std::string Usage() {
  return std::string(kUsageFlags) + kUsageDnsExplain + kUsageReport + kUsageExit;
}

namespace {

// The flag at args[*i], `--name=value` or `--name value`, when `name` is one of `valued`: sets
// *name and *value and moves *i past a separate value. False and *error on an unknown flag
// (`context` prefixes the message: "report: ") or a missing value.
bool TakeFlag(const std::vector<std::string>& args, std::size_t* i,
              std::initializer_list<std::string_view> valued, const std::string& context,
              std::string* name, std::string* value, std::string* error) {
  const std::string& arg = args[*i];
  auto eq = arg.find('=');
  *name = arg.substr(0, eq);
  if (std::find(valued.begin(), valued.end(), *name) == valued.end()) {
    *error = context + "unknown flag " + arg + " (see --help)";
    return false;
  }
  if (eq != std::string::npos) {
    *value = arg.substr(eq + 1);
  } else if (*i + 1 < args.size()) {
    *value = args[++*i];
  } else {
    *error = "flag " + *name + " needs a value";
    return false;
  }
  return true;
}

// The flags the daemon and `report` share: --config.file, --log.level, --log.format and
// --kubeconfig. kOther for any other name; kBad with *error on a bad value.
enum class Shared { kSet, kBad, kOther };
Shared SetSharedFlag(const std::string& name, const std::string& value, Options& o,
                     std::string* error) {
  if (name == "--config.file") {
    o.config_file = value;
  } else if (name == "--log.level") {
    auto l = log::ParseLevel(value);
    if (!l) {
      *error = "--log.level must be debug, info, warn or error, got \"" + value + "\"";
      return Shared::kBad;
    }
    o.log_level = *l;
  } else if (name == "--log.format") {
    auto f = log::ParseFormat(value);
    if (!f) {
      *error = "--log.format must be logfmt or json, got \"" + value + "\"";
      return Shared::kBad;
    }
    o.log_format = *f;
  } else if (name == "--kubeconfig") {
    o.kubeconfig = value;
  } else {
    return Shared::kOther;
  }
  return Shared::kSet;
}

// dns-explain NAME [--resolv-conf=PATH] [--resolver=glibc|musl] (args[0] is "dns-explain").
std::optional<Options> ParseDnsExplain(const std::vector<std::string>& args, std::string* error) {
  Options o;
  o.mode = Options::Mode::kDnsExplain;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      o.mode = Options::Mode::kHelp;
      return o;
    }
    if (arg.rfind("--", 0) != 0) {
      if (!o.dns_name.empty()) {
        *error = "dns-explain takes one NAME, got \"" + o.dns_name + "\" and \"" + arg + "\"";
        return std::nullopt;
      }
      o.dns_name = arg;
      continue;
    }
    std::string name, value;
    if (!TakeFlag(args, &i, {"--resolv-conf", "--resolver"}, "dns-explain: ", &name, &value,
                  error)) {
      return std::nullopt;
    }
    if (name == "--resolv-conf") {
      o.resolv_conf = value;
    } else if (value == "glibc" || value == "musl") {
      o.resolver = value;
    } else {
      *error = "--resolver must be glibc or musl, got \"" + value + "\"";
      return std::nullopt;
    }
  }
  if (o.dns_name.empty()) {
    *error = "dns-explain needs a NAME (see --help)";
    return std::nullopt;
  }
  return o;
}

// One of `report`'s own flags (--duration, --format, --baseline, --input, --price-per-gb) or a
// shared one into `o`; false and *error on a bad value.
bool SetReportFlag(const std::string& name, const std::string& value, Options& o,
                   std::string* error) {
  if (auto shared = SetSharedFlag(name, value, o, error); shared != Shared::kOther) {
    return shared == Shared::kSet;
  }
  if (name == "--duration") {
    auto d = config::ParseDuration(value);
    if (!d || *d < std::chrono::seconds(1) || *d > std::chrono::hours(1)) {
      *error = "--duration must be a duration from 1s to 1h (e.g. 60s), got \"" + value + "\"";
      return false;
    }
    o.report.duration = *d;
  } else if (name == "--format") {
    using Format = Options::Report::Format;
    static const std::map<std::string, Format> kFormats = {
        {"markdown", Format::kMarkdown}, {"json", Format::kJson}, {"html", Format::kHtml}};
    auto it = kFormats.find(value);
    if (it == kFormats.end()) {
      *error = "--format must be markdown, json or html, got \"" + value + "\"";
      return false;
    }
    o.report.format = it->second;
  } else if (name == "--baseline" || name == "--input") {
    // An empty name would read as "no flag": --input= would probe live, --baseline= compare
    // with nothing, both silently.
    if (value.empty()) {
      *error = name + ": empty file name";
      return false;
    }
    (name == "--baseline" ? o.report.baseline : o.report.input) = value;
  } else {  // --price-per-gb
    char* end = nullptr;
    double price = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(price >= 0) || price > 1e6) {
      *error = "--price-per-gb must be a number of dollars >= 0, got \"" + value + "\"";
      return false;
    }
    o.report.price_per_gb = price;
  }
  return true;
}

// report [flags] (args[0] is "report").
std::optional<Options> ParseReport(const std::vector<std::string>& args, std::string* error) {
  Options o;
  o.mode = Options::Mode::kReport;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      o.mode = Options::Mode::kHelp;
      return o;
    }
    if (arg == "--fail-on-change") {
      o.report.fail_on_change = true;
      continue;
    }
    std::string name, value;
    if (!TakeFlag(args, &i,
                  {"--config.file", "--duration", "--format", "--baseline", "--price-per-gb",
                   "--input", "--log.level", "--log.format", "--kubeconfig"},
                  "report: ", &name, &value, error)) {
      return std::nullopt;
    }
    if (!SetReportFlag(name, value, o, error)) return std::nullopt;
  }
  if (o.report.fail_on_change && o.report.baseline.empty()) {
    *error = "--fail-on-change needs --baseline=FILE.json (a change against what?)";
    return std::nullopt;
  }
  if (o.config_file.empty()) o.config_file = "/etc/podnet-exporter/podnet.yaml";
  return o;
}

// One of the daemon's own flags (--web.config.file, --config.auto-reload-interval,
// --shutdown.drain-period, --web.listen-address) or a shared one into `o`; false and *error on
// a bad value.
bool SetDaemonFlag(const std::string& name, const std::string& value, Options& o,
                   std::string* error) {
  if (auto shared = SetSharedFlag(name, value, o, error); shared != Shared::kOther) {
    return shared == Shared::kSet;
  }
  if (name == "--web.config.file") {
    o.web_config_file = value;
  } else if (name == "--config.auto-reload-interval") {
    auto d = config::ParseDuration(value);
    // At least 1 s, as Prometheus's own --config.auto-reload-interval: each read is up to
    // 512 KiB, and "30ms" for "30s" would spend a core on it.
    if (!d || (*d > std::chrono::nanoseconds(0) && *d < std::chrono::seconds(1))) {
      *error =
          "--config.auto-reload-interval must be 0s (off) or a duration of 1s or more, "
          "such as 30s, got \"" +
          value + "\"";
      return false;
    }
    o.config_auto_reload_interval = *d;
  } else if (name == "--shutdown.drain-period") {
    auto d = config::ParseDuration(value);
    if (!d) {
      *error =
          "--shutdown.drain-period must be a duration such as 10s or 0s, got \"" + value + "\"";
      return false;
    }
    o.shutdown_drain_period = *d;
  } else {
    std::string err;
    o.listen_address = net::ParseHostPort(value, &err);
    if (!o.listen_address) {
      *error = "--web.listen-address: " + err;
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<Options> ParseCommandLine(const std::vector<std::string>& args, std::string* error) {
  Options o;
  bool check = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (i == 0 && arg == "dns-explain") return ParseDnsExplain(args, error);
    if (i == 0 && arg == "report") return ParseReport(args, error);
    if (arg == "-h" || arg == "--help") {
      o.mode = Options::Mode::kHelp;
      return o;
    }
    if (arg == "--version") {
      o.mode = Options::Mode::kVersion;
      return o;
    }
    if (arg == "--config.check") {
      check = true;
      continue;
    }
    std::string name, value;
    if (!TakeFlag(args, &i,
                  {"--config.file", "--web.listen-address", "--web.config.file", "--log.level",
                   "--log.format", "--kubeconfig", "--config.auto-reload-interval",
                   "--shutdown.drain-period"},
                  "", &name, &value, error)) {
      return std::nullopt;
    }
    if (!SetDaemonFlag(name, value, o, error)) return std::nullopt;
  }
  if (o.config_file.empty()) {
    *error = "--config.file is required (see --help)";
    return std::nullopt;
  }
  if (check) o.mode = Options::Mode::kCheckConfig;
  return o;
}

}  // namespace podnet::app
