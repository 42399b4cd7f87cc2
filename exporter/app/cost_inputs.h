#pragma once

#include <vector>

#include "exporter/config/config.h"
#include "exporter/report/cost.h"
#include "exporter/topology/topology.h"

namespace podnet::app {

/// The configuration and the cluster as the report's cost arithmetic (report/cost.h) reads
/// them: report/ does not depend on config/, so the composer translates.

/// The probe kinds' options of `c` as the cost arithmetic reads them (report/cost.h): intervals
/// and durations in seconds, counts and sizes as configured; bursts coordinated with
/// peers.kubernetes.
report::CostConfig CostConfigOf(const config::Config& c);

/// The "cluster_cost" section's inputs: CostConfigOf(c), the price, and the cluster. N and Z:
/// with peers.kubernetes and `discovered` (the latest Pod list, null when discovery never
/// listed), its Pods and their distinct zones; else the static peers and this Pod. Z is at least
/// 1 (unknown zones are one zone). series_per_pod: SeriesPerPod(c) (series_check.h).
report::CostInputs CostInputsOf(const config::Config& c,
                                const std::vector<topology::Peer>* discovered,
                                double price_usd_per_gb);

}  // namespace podnet::app
