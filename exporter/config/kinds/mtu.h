#pragma once

// probes.mtu: its options, decoder and metric families (the probe: probes/mtu/).

#include <chrono>

#include "exporter/config/kinds/section.h"
#include "exporter/config/units.h"

namespace podnet::config::kinds::mtu {

/// probes.mtu: every `interval`, towards each peer's UDP echo responder, a path-MTU search in
/// each direction (probes/mtu/mtu_probe.h) between `min_size` and the smaller of `max_size` and
/// this Pod's interface MTU, in IP packet bytes (IP and UDP headers included), with at most
/// `max_datagrams` datagrams a direction; a datagram unanswered after `timeout` is lost (sent
/// once more before it counts).
struct MtuOptions {
  Duration interval = std::chrono::minutes(10);
  Duration timeout = std::chrono::milliseconds(500);
  int min_size = 1280;  // the smallest MTU IPv6 allows (RFC 8200)
  int max_size = 9001;  // jumbo frames as AWS, GCP and Azure offer them (9001, 8896, ...)
  int max_datagrams = 24;

  bool operator==(const MtuOptions&) const = default;
};

/// Reads probes.mtu (the keys: docs/configuration.md) into c.mtu.
void Decode(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c);

/// The metric families the kind exports (its probe declares them: metrics::Declare*).
inline constexpr FamilyDecl kFamilies[] = {
    {"podnet_path_mtu_black_hole"},
    {"podnet_path_mtu_bytes"},
    {"podnet_path_mtu_icmp_bytes"},
    {"podnet_path_mtu_interface_bytes"},
};

}  // namespace podnet::config::kinds::mtu
