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

/// Every family the probe kinds declare, sorted by name: the rows of each kind's own list
/// (config/kinds/<kind>.cc, Families()), gathered through config.h's kProbeSections. The names
/// `metrics.families` accepts. tests/unit/probes/kind_families_test.cc checks them against the
/// families the kinds' probes really declare (metrics::Declare*), both ways.
std::span<const MetricFamilyEntry> MetricFamilies();

/// The families off when `metrics.families` says nothing: those of MetricFamilies() that are not
/// on_by_default.
std::set<std::string, std::less<>> DefaultFamiliesOff();

}  // namespace podnet::config
