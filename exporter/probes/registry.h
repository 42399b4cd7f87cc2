#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "exporter/probes/probe.h"
#include "exporter/probes/series_estimate.h"

namespace podnet::probes {

/// One row of the table that wires probe kinds to their code (the only place that does).
struct ProbeKindEntry {
  std::string_view name;  // the key under `probes:` and the `probe` label value
  /// Builds the kind for a configuration; nullptr when the configuration leaves it off.
  std::function<std::shared_ptr<ProbeKind>(const config::Config&, ProbeEnv&)> make;
  /// Whether two configurations set the kind up differently (then its probes are rebuilt).
  std::function<bool(const config::Config&, const config::Config&)> changed;
  /// Whether the configuration turns the kind on.
  std::function<bool(const config::Config&)> on;
  /// The kind's series from one Pod, for a configuration that turns it on (series_estimate.h):
  /// its families into the counter; returns how many podnet_probe_sent_bytes_total series it
  /// adds (as many received).
  std::function<std::size_t(const config::Config&, SeriesCounter&)> count_series;
};

/// Every probe kind this build has, in registry.cc's one table (gRPC only when built with it).
std::span<const ProbeKindEntry> ProbeKinds();

}  // namespace podnet::probes
