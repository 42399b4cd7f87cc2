#pragma once

#include <cstddef>
#include <memory>

#include "exporter/config/kinds/burst.h"
#include "exporter/probes/probe.h"
#include "exporter/probes/series_estimate.h"

namespace podnet::probes::burst {

// The options this kind reads (its section of the configuration: config/kinds/burst.h).
using config::kinds::burst::BurstOptions;
using config::kinds::burst::BurstResponderOptions;

/// The throughput burst probe kind (probes.burst): iperf3-compatible TCP bursts (BurstClient)
/// to the peers' burst responders, one per entry of `streams` per round.
///
/// Cost control: bursts of this exporter never overlap — rounds of all peers queue in the kind
/// and run one at a time, each after a random jitter of up to min(interval/10, 10 s). Before
/// each burst the byte budget (max_bytes_per_hour, a sliding hour of wire bytes sent) is
/// checked: with less left than the previous burst of that stream count sent, the burst is
/// skipped (podnet_probe_errors_total{probe="burst",reason="budget_exhausted"}); a burst that
/// runs stops sending at what is left. The budget's history is per process: a reload keeps it.
///
/// Series per peer, `streams` = the burst's parallel connections:
/// podnet_burst_throughput_bytes_per_second (receiver's bytes / data time, last burst),
/// podnet_burst_sent_bytes_total (payload written), podnet_burst_retransmits_total
/// (Δ tcpi_total_retrans), podnet_burst_tcp_rtt_seconds (mean smoothed tcpi_rtt under load),
/// podnet_burst_snd_cwnd_bytes (Σ streams' max tcpi_snd_cwnd × tcpi_snd_mss),
/// podnet_burst_interval_min_throughput_bytes_per_second (slowest 100 ms interval after the
/// first: throttling shows here), podnet_burst_sender_cpu_seconds_total; per peer
/// podnet_burst_path_mtu_bytes, podnet_probe_{sent,received}_bytes_total{probe="burst"} (wire
/// bytes, headers and control connection included) and podnet_probe_errors_total{probe="burst"}
/// with reason connect | access_denied | server_error | protocol | timeout | connection_lost |
/// budget_exhausted. Kind-wide: podnet_burst_budget_remaining_bytes.
std::shared_ptr<ProbeKind> MakeBurstKind(const BurstOptions& options, ProbeEnv& env);

/// The series this kind exports from one Pod, once every probe has run a round and every answer
/// was the healthy one: its families into `n` (probes/series_estimate.h); returns how many
/// podnet_probe_sent_bytes_total series it adds (as many received). `c` turns the kind on.
std::size_t CountSeries(const config::Config& c, SeriesCounter& n);

}  // namespace podnet::probes::burst
