#pragma once

#include <cstddef>
#include <memory>

#include "exporter/config/config.h"
#include "exporter/config/kinds/rtt.h"
#include "exporter/probes/probe.h"
#include "exporter/probes/series_estimate.h"

namespace podnet::probes::rtt {

// The options this kind reads (its section of the configuration: config/kinds/rtt.h).
using config::kinds::rtt::RttOptions;
using config::kinds::rtt::RttProtocol;
using config::kinds::rtt::RttProtocolName;

/// The RTT probe kind (probes.rtt): packet trains of ICMP echo requests (RFC 792 / RFC 4443) or
/// UDP echo datagrams to the peers' UDP echo responders.
///
/// Sockets: one per address family, shared by all peers. ICMP uses an unprivileged datagram
/// "ping" socket (socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP); allowed when the process's group is
/// in net.ipv4.ping_group_range) and otherwise a raw socket (needs CAP_NET_RAW). A socket that
/// cannot be opened makes every round fail with podnet_probe_errors_total{reason="socket"}.
///
/// Timing: RTT = kernel software RX stamp − kernel software TX stamp (SO_TIMESTAMPING), so
/// neither our scheduler nor the serving thread is in the figure; without kernel stamps the
/// user-space time next to sendmsg/recvmsg is used instead.
///
/// Series per peer (labels: metrics::PeerLabels + protocol="icmp"|"udp"): podnet_rtt_seconds,
/// podnet_rtt_packets_sent_total, podnet_rtt_packets_received_total (in time),
/// podnet_rtt_duplicate_replies_total, podnet_rtt_reordered_replies_total,
/// podnet_rtt_late_replies_total (after the timeout: lost, as ping -W counts them),
/// podnet_rtt_round_min_seconds and podnet_rtt_round_median_seconds (gauges: the exact minimum
/// and median of the last round's in-time RTTs, train.h Summarize; removed after a round with
/// none, added again by the next round with one),
/// podnet_probe_{sent,received}_bytes_total{probe="rtt"} and podnet_probe_errors_total{probe="rtt"}
/// with reason "socket" | "send_failed" | "tx_timestamping" (after a failed send the kernel would
/// not restart its TX-stamp keys: that socket's RTTs use user-space TX stamps from then on).
std::shared_ptr<ProbeKind> MakeRttKind(const RttOptions& options, ProbeEnv& env);

/// The series this kind exports from one Pod, once every probe has run a round and every answer
/// was the healthy one: its families into `n` (probes/series_estimate.h); returns how many
/// podnet_probe_sent_bytes_total series it adds (as many received). `c` turns the kind on.
std::size_t CountSeries(const config::Config& c, SeriesCounter& n);

}  // namespace podnet::probes::rtt
