#pragma once

// What a probe kind declares about its section of the configuration (probes.<kind>): a row of
// the one table config.h keeps (kProbeSections), beside the Config member the row fills. Each
// kind's options, decoder and metric families live in config/kinds/<kind>.{h,cc}, namespace
// podnet::config::kinds::<kind>; its behaviour in probes/<kind>/.

#include <span>
#include <string_view>

#include "exporter/config/units.h"

namespace YAML {
class Node;
}

namespace podnet::config {

class Decoder;
struct Config;

namespace kinds {

/// One metric family a kind exports, as `metrics.families` names it (no _bucket, _sum or
/// _count suffix). A family off by default is one few people need and that costs a histogram
/// per (peer zone, path class).
struct FamilyDecl {
  std::string_view name;
  bool on_by_default = true;
};

/// What a kind's decoder may read beyond its own section.
struct SectionContext {
  /// The file has a peers.kubernetes section (valid or not: its own problems are reported
  /// there, not again by the sections that need it).
  bool kubernetes = false;
};

/// One row of config.h's kProbeSections.
struct ProbeSection {
  std::string_view key;  // the key under `probes:` and the `probe` label value
  /// Reads the section `n` (present in the file) into its Config member, every problem into
  /// `d` with its key path under probes.<key>.
  void (*decode)(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c);
  /// Whether `c` turns the kind on (its member is set).
  bool (*on)(const Config& c);
  /// How often the kind runs a round in `c`; nullptr when it is off. Mutable, for the report's
  /// run, which caps every interval at its --duration.
  Duration* (*interval)(Config& c);
  /// The metric families the kind exports (tests/unit/probes/kind_families_test.cc checks them
  /// against what its probes declare, both ways).
  std::span<const FamilyDecl> families;
};

}  // namespace kinds
}  // namespace podnet::config
