#pragma once

#include <set>
#include <span>
#include <string>
#include <string_view>

namespace podnet::config {

/// One metric family a probe kind exports, as `metrics.families` names it.
struct MetricFamilyEntry {
  std::string_view name;  // the family's name in the exposition (no _bucket/_sum/_count suffix)
  std::string_view kind;  // the probe kind that declares it (the key under `probes:`)
  bool on_by_default;
};

/// Every family the probe kinds declare (metrics::Declare*), sorted by name: the names
/// `metrics.families` accepts. A family off by default is one few people need and that costs
/// a histogram per (peer zone, path class): the HTTP probe's time to first byte and connect
/// time (the request duration already includes both). tests/unit/probes/kind_families_test.cc
/// checks this list against the families the kinds really declare, both ways.
std::span<const MetricFamilyEntry> MetricFamilies();

/// The families off when `metrics.families` says nothing: those of MetricFamilies() that are not
/// on_by_default.
std::set<std::string, std::less<>> DefaultFamiliesOff();

}  // namespace podnet::config
