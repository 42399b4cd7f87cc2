#pragma once

#include <chrono>

#include "exporter/config/units.h"

namespace podnet::probes::rtt {

enum class RttProtocol { kIcmp, kUdp };
const char* RttProtocolName(RttProtocol p);  // "icmp" | "udp"

/// probes.rtt: a train of `count` echo requests `spacing` apart, every `interval`; a request
/// unanswered `timeout` after the train's last send is lost (the deadline is rounded up to the
/// scheduler's 20 ms grid, so it may be up to 20 ms later). A train whose every request has been
/// answered ends at its last reply.
struct RttOptions {
  RttProtocol protocol = RttProtocol::kIcmp;
  config::Duration interval = std::chrono::seconds(10);
  int count = 20;
  config::Duration spacing = std::chrono::milliseconds(50);
  config::Duration timeout = std::chrono::seconds(1);
  /// Payload bytes after the ICMP/UDP header (our 16-byte probe header included), as ping -s.
  int size = 56;

  bool operator==(const RttOptions&) const = default;
};

}  // namespace podnet::probes::rtt
