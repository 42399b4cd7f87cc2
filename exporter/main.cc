// podnet-exporter: Pod-to-Pod network latency by path class, for Prometheus.
#include <malloc.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exporter/app/app.h"
#include "exporter/app/cli.h"
#include "exporter/app/early_signals.h"
#include "exporter/app/report_run.h"
#include "exporter/app/series_check.h"
#include "exporter/config/config.h"
#include "exporter/log/logging.h"
#include "exporter/probes/dns/explain.h"
#include "exporter/web/tls_context.h"
#include "exporter/web/web_config.h"
#include "podnet/version.h"

namespace {

using podnet::app::Options;

// The modes that need no configuration file (--help, --version, dns-explain, report --input):
// their exit code; std::nullopt for the others.
std::optional<int> RunWithoutConfig(const Options& options) {
  switch (options.mode) {
    case Options::Mode::kHelp:
      std::cout << podnet::app::Usage();
      return 0;
    case Options::Mode::kVersion:
      std::cout << "podnet-exporter, version " << podnet::kVersion << " (revision "
                << podnet::kRevision << ")\n";
      return 0;
    case Options::Mode::kDnsExplain: {
      // Both C libraries unless --resolver names one.
      std::vector<podnet::config::kinds::dns::Libc> libcs = {
          podnet::config::kinds::dns::Libc::kGlibc, podnet::config::kinds::dns::Libc::kMusl};
      if (!options.resolver.empty())
        libcs = {*podnet::config::kinds::dns::ParseLibc(options.resolver)};
      return podnet::probes::dns::ExplainLookup(options.dns_name, options.resolv_conf, libcs,
                                                std::cout);
    }
    case Options::Mode::kReport:
      if (!options.report.input.empty()) {  // a saved report: no configuration, no probing
        return podnet::app::RunReport(options, nullptr, std::cout, std::cerr);
      }
      return std::nullopt;
    case Options::Mode::kCheckConfig:
    case Options::Mode::kRun:
      return std::nullopt;
  }
  return std::nullopt;
}

// --config.file, its warnings and problems on stderr; null when it has problems.
std::shared_ptr<const podnet::config::Config> LoadConfig(const Options& options) {
  auto loaded = podnet::config::LoadFile(options.config_file, podnet::config::ProcessEnv());
  for (const auto& w : loaded.warnings) std::cerr << "warning: " << w.ToString() << "\n";
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors) std::cerr << e.ToString() << "\n";
    const std::size_t n = loaded.problem_count();
    std::cerr << "podnet-exporter: " << n << (n == 1 ? " problem in " : " problems in ")
              << options.config_file << "\n";
  }
  return loaded.config;
}

// --web.config.file into *web (left null without one), its certificate and key loaded and
// matched; false, with the problems on stderr, when it cannot be used.
bool LoadWeb(const Options& options, std::shared_ptr<const podnet::web::WebConfig>* web) {
  if (options.web_config_file.empty()) return true;
  auto w = podnet::web::LoadWebConfig(options.web_config_file);
  for (const auto& e : w.errors) std::cerr << e.ToString() << "\n";
  if (!w.config) {
    std::cerr << "podnet-exporter: " << w.errors.size()
              << (w.errors.size() == 1 ? " problem in " : " problems in ")
              << options.web_config_file << "\n";
    return false;
  }
  if (w.config->tls) {  // the certificate and key must load, and match
    std::string err;
    if (!podnet::web::LoadTlsContext(*w.config->tls, &err)) {
      std::cerr << options.web_config_file << ": tls_server_config: " << err << "\n";
      return false;
    }
  }
  *web = w.config;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // First: a SIGHUP from a config-map watcher while we start must not kill us (signal(7)).
  podnet::app::InstallEarlySignalHandlers();
  // A fixed mmap threshold (glibc's default adapts it upwards to the largest block freed, up
  // to 32 MiB): a /metrics body of several MiB is then mapped and unmapped per scrape instead
  // of staying in the heap as resident memory between scrapes (bench/README.md, scale_1000).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string error;
  auto options = podnet::app::ParseCommandLine(args, &error);
  if (!options) {
    std::cerr << "podnet-exporter: " << error << "\n";
    return 2;
  }
  if (auto rc = RunWithoutConfig(*options)) return *rc;
  podnet::log::Setup(options->log_level, options->log_format);
  auto config = LoadConfig(*options);
  std::shared_ptr<const podnet::web::WebConfig> web;
  if (!config || !LoadWeb(*options, &web)) return 2;
  if (options->mode == Options::Mode::kCheckConfig) {
    if (web) std::cout << options->web_config_file << ": OK\n";
    std::cout << options->config_file << ": OK (" << podnet::config::Summary(*config) << ")\n"
              << podnet::app::SeriesCheck(*config);
    return 0;
  }
  if (options->mode == Options::Mode::kReport) {
    return podnet::app::RunReport(*options, config, std::cout, std::cerr);
  }
  spdlog::info("starting podnet-exporter version {} (revision {})", podnet::kVersion,
               podnet::kRevision);
  podnet::app::App app(*options, config, web);
  return app.Run();
}
