#pragma once

// probes.burst and responders.burst: their options; probes.burst's decoder and metric families
// (the probe: probes/burst/; the responder: responders/burst_server.h).

#include <chrono>
#include <cstdint>
#include <vector>

#include "exporter/config/kinds/section.h"
#include "exporter/config/units.h"
#include "exporter/net/address.h"

namespace podnet::config::kinds::burst {

/// probes.burst: every `interval`, each peer gets one TCP burst of `duration` per entry of
/// `streams` (parallel connections), against its iperf3-compatible responder (burst_port).
/// Bursts of one exporter never overlap; `max_bytes_per_hour` caps the bytes they send in any
/// sliding hour (a burst that does not fit is skipped and counted; a running burst stops
/// sending when it reaches what is left).
struct BurstOptions {
  Duration interval = std::chrono::minutes(15);
  Duration duration = std::chrono::seconds(2);
  std::vector<int> streams = {1, 8};
  std::uint64_t max_bytes_per_hour = 20'000'000'000ULL;  // 20 GB
  /// Deadline of each step before and after the data phase (connect, each control message).
  Duration step_timeout = std::chrono::seconds(5);

  /// probes.burst.coordinated: how bursts run with peers.kubernetes (ignored without it). Each
  /// `period` (numbered floor(unix time / period)), every ordered zone pair (A → B, same-zone
  /// pairs included) gets one round of bursts from one prober in A to one peer in B, both
  /// chosen by rendezvous hashing over the discovered Pod list (topology::ChooseBurstPair);
  /// every other Pod skips the pair. `interval` is then how often a Pod checks whether it is a
  /// pair's prober (the prober bursts at its first check in a period). Each burst sends at
  /// most `max_bytes_per_burst` payload bytes, so the cluster's burst bytes per period are at
  /// most zones² × len(streams) × max_bytes_per_burst, whatever the node count and link speed.
  struct Coordinated {
    Duration period = std::chrono::hours(6);
    std::uint64_t max_bytes_per_burst = 500'000'000ULL;  // 500 MB

    bool operator==(const Coordinated&) const = default;
  };
  Coordinated coordinated;

  bool operator==(const BurstOptions&) const = default;
};

/// responders.burst: the iperf3-compatible server peers' burst probes (and stock `iperf3 -c`)
/// aim at. Present = on.
struct BurstResponderOptions {
  net::HostPort listen_address{boost::asio::ip::address_v4::any(), 5201};
  std::chrono::seconds max_duration{10};  // a test asking for longer (time + omit) is refused
  int max_clients = 2;                    // concurrent tests; more get ACCESS_DENIED
  int max_streams = 16;                   // parallel streams per test
  // `clients`: false ("probe_pods", the default) admits only the addresses of the probe Pods
  // discovery lists and of the static peers; true ("any") every source, e.g. `iperf3 -c`.
  bool any_client = false;

  bool operator==(const BurstResponderOptions& o) const {
    return listen_address.address == o.listen_address.address &&
           listen_address.port == o.listen_address.port && max_duration == o.max_duration &&
           max_clients == o.max_clients && max_streams == o.max_streams &&
           any_client == o.any_client;
  }
};

/// Reads probes.burst (the keys: docs/configuration.md) into c.burst; a round longer than its
/// interval is an error.
void Decode(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c);

/// The metric families the kind exports (its probe declares them: metrics::Declare*).
inline constexpr FamilyDecl kFamilies[] = {
    {"podnet_burst_budget_remaining_bytes"},
    {"podnet_burst_interval_min_throughput_bytes_per_second"},
    {"podnet_burst_pairs_skipped_total"},
    {"podnet_burst_path_mtu_bytes"},
    {"podnet_burst_retransmits_total"},
    {"podnet_burst_sender_cpu_seconds_total"},
    {"podnet_burst_sent_bytes_total"},
    {"podnet_burst_snd_cwnd_bytes"},
    {"podnet_burst_tcp_rtt_seconds"},
    {"podnet_burst_throughput_bytes_per_second"},
};

}  // namespace podnet::config::kinds::burst
