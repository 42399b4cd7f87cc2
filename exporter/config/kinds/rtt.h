#pragma once

// probes.rtt: its options, decoder and metric families (the probe: probes/rtt/).

#include <chrono>

#include "exporter/config/kinds/section.h"
#include "exporter/config/units.h"

namespace podnet::config::kinds::rtt {

enum class RttProtocol { kIcmp, kUdp };
const char* RttProtocolName(RttProtocol p);  // "icmp" | "udp"

/// probes.rtt: a train of `count` echo requests `spacing` apart, every `interval`; a request
/// unanswered `timeout` after the train's last send is lost (the deadline is rounded up to the
/// scheduler's 20 ms grid, so it may be up to 20 ms later). A train whose every request has been
/// answered ends at its last reply.
struct RttOptions {
  RttProtocol protocol = RttProtocol::kIcmp;
  Duration interval = std::chrono::seconds(10);
  int count = 20;
  Duration spacing = std::chrono::milliseconds(50);
  Duration timeout = std::chrono::seconds(1);
  /// Payload bytes after the ICMP/UDP header (our 16-byte probe header included), as ping -s.
  int size = 56;

  bool operator==(const RttOptions&) const = default;
};

/// Reads probes.rtt (the keys: docs/configuration.md) into c.rtt; a train longer than its
/// interval is an error.
void Decode(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c);

/// The metric families the kind exports (its probe declares them: metrics::Declare*).
inline constexpr FamilyDecl kFamilies[] = {
    {"podnet_rtt_duplicate_replies_total"}, {"podnet_rtt_late_replies_total"},
    {"podnet_rtt_packets_received_total"},  {"podnet_rtt_packets_sent_total"},
    {"podnet_rtt_reordered_replies_total"}, {"podnet_rtt_round_median_seconds"},
    {"podnet_rtt_round_min_seconds"},       {"podnet_rtt_seconds"},
    {"podnet_rtt_timestamps_total"},
};

}  // namespace podnet::config::kinds::rtt
