#include "exporter/app/cli.h"

namespace podnet::app {

std::string Usage() {
  return R"(usage: podnet-exporter --config.file=PATH [flags]
       podnet-exporter --config.file=PATH --config.check
       podnet-exporter dns-explain NAME [--resolv-conf=PATH] [--resolver=glibc|musl]
       podnet-exporter --version

Measures Pod-to-Pod network latency by path class (same_node, same_zone, cross_zone) and
exposes it for Prometheus on /metrics.

flags:
  --config.file=PATH             configuration file (YAML; ${VAR} expanded from the environment)
  --config.check                 validate the configuration, print every problem, exit 0 or 2
  --web.listen-address=HOST:PORT overrides listen_address of the configuration (default :9479)
  --web.config.file=PATH         TLS, basic auth and headers for the HTTP port (exporter-toolkit's
                                 format; /echo, /-/healthy and /-/ready stay plain and open)
  --log.level=LEVEL              debug, info, warn or error (default info)
  --log.format=FORMAT            logfmt or json (default logfmt)
  --kubeconfig=PATH              Kubernetes client configuration outside a cluster (default
                                 $KUBECONFIG; unset: the Pod's service account, in-cluster)
  --version                      print the version and exit
  -h, --help                     print this help and exit

dns-explain: performs one lookup of NAME the way the C library would (glibc, the default, or
musl) under the resolv.conf (default /etc/resolv.conf) and prints every question it sends, its
answer and timing, and the result. Exit codes: 0 the name was found, 1 it was not (NXDOMAIN,
NODATA, SERVFAIL, timeout, refused, or a name the C library refuses to send), 2 bad flags.

exit codes: 0 ok, 1 a listener cannot be bound, 2 bad flags or bad configuration.
SIGHUP or POST /-/reload reloads the configuration; a bad file keeps the running one.
)";
}

namespace {

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
    std::string name = arg;
    std::optional<std::string> value;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    if (name != "--resolv-conf" && name != "--resolver") {
      *error = "dns-explain: unknown flag " + arg + " (see --help)";
      return std::nullopt;
    }
    if (!value) {
      if (i + 1 >= args.size()) {
        *error = "flag " + name + " needs a value";
        return std::nullopt;
      }
      value = args[++i];
    }
    if (name == "--resolv-conf") {
      o.resolv_conf = *value;
    } else if (*value == "glibc" || *value == "musl") {
      o.resolver = *value;
    } else {
      *error = "--resolver must be glibc or musl, got \"" + *value + "\"";
      return std::nullopt;
    }
  }
  if (o.dns_name.empty()) {
    *error = "dns-explain needs a NAME (see --help)";
    return std::nullopt;
  }
  return o;
}

}  // namespace

std::optional<Options> ParseCommandLine(const std::vector<std::string>& args, std::string* error) {
  Options o;
  bool check = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (i == 0 && arg == "dns-explain") return ParseDnsExplain(args, error);
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
    std::string name = arg;
    std::optional<std::string> value;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    static const char* kValued[] = {"--config.file", "--web.listen-address", "--web.config.file",
                                    "--log.level",   "--log.format",         "--kubeconfig"};
    bool known = false;
    for (const char* k : kValued) known = known || name == k;
    if (!known) {
      *error = "unknown flag " + arg + " (see --help)";
      return std::nullopt;
    }
    if (!value) {
      if (i + 1 >= args.size()) {
        *error = "flag " + name + " needs a value";
        return std::nullopt;
      }
      value = args[++i];
    }
    if (name == "--config.file") {
      o.config_file = *value;
    } else if (name == "--web.config.file") {
      o.web_config_file = *value;
    } else if (name == "--web.listen-address") {
      o.listen_address = *value;
    } else if (name == "--log.level") {
      auto l = log::ParseLevel(*value);
      if (!l) {
        *error = "--log.level must be debug, info, warn or error, got \"" + *value + "\"";
        return std::nullopt;
      }
      o.log_level = *l;
    } else if (name == "--log.format") {
      auto f = log::ParseFormat(*value);
      if (!f) {
        *error = "--log.format must be logfmt or json, got \"" + *value + "\"";
        return std::nullopt;
      }
      o.log_format = *f;
    } else {
      o.kubeconfig = *value;
    }
  }
  if (o.config_file.empty()) {
    *error = "--config.file is required (see --help)";
    return std::nullopt;
  }
  if (check) o.mode = Options::Mode::kCheckConfig;
  return o;
}

}  // namespace podnet::app
