#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "exporter/config/units.h"
#include "exporter/net/address.h"

namespace podnet::probes::burst {

/// probes.burst: every `interval`, each peer gets one TCP burst of `duration` per entry of
/// `streams` (parallel connections), against its iperf3-compatible responder (burst_port).
/// Bursts of one exporter never overlap; `max_bytes_per_hour` caps the bytes they send in any
/// sliding hour (a burst that does not fit is skipped and counted; a running burst stops
/// sending when it reaches what is left).
struct BurstOptions {
  config::Duration interval = std::chrono::minutes(15);
  config::Duration duration = std::chrono::seconds(2);
  std::vector<int> streams = {1, 8};
  std::uint64_t max_bytes_per_hour = 20'000'000'000ULL;  // 20 GB
  /// Deadline of each step before and after the data phase (connect, each control message).
  config::Duration step_timeout = std::chrono::seconds(5);

  bool operator==(const BurstOptions&) const = default;
};

/// responders.burst: the iperf3-compatible server peers' burst probes (and stock `iperf3 -c`)
/// aim at. Present = on.
struct BurstResponderOptions {
  net::HostPort listen_address{boost::asio::ip::address_v4::any(), 5201};
  std::chrono::seconds max_duration{10};  // a test asking for longer (time + omit) is refused
  int max_clients = 2;                    // concurrent tests; more get ACCESS_DENIED
  int max_streams = 16;                   // parallel streams per test

  bool operator==(const BurstResponderOptions& o) const {
    return listen_address.address == o.listen_address.address &&
           listen_address.port == o.listen_address.port && max_duration == o.max_duration &&
           max_clients == o.max_clients && max_streams == o.max_streams;
  }
};

}  // namespace podnet::probes::burst
