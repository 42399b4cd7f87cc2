#pragma once

#include <cstddef>
#include <memory>

#include "exporter/config/kinds/mtu.h"
#include "exporter/probes/probe.h"
#include "exporter/probes/series_estimate.h"

namespace podnet::probes::mtu {

// The options this kind reads (its section of the configuration: config/kinds/mtu.h).
using config::kinds::mtu::MtuOptions;

/// The path-MTU probe kind (probes.mtu): towards each peer's UDP echo responder, the largest IP
/// packet that crosses the path in each direction, whether an ICMP error says so, and whether
/// the path is a black hole (large packets lost with no error: TCP then stalls where pings and
/// small requests pass).
///
/// A round opens one UDP socket connected to the peer (IP_MTU_DISCOVER = IP_PMTUDISC_PROBE, or
/// IPV6_MTU_DISCOVER = IPV6_PMTUDISC_PROBE and IPV6_DONTFRAG: the don't-fragment bit set, and the
/// kernel's cached path MTU not applied, so any size up to the interface's can be sent;
/// IP_RECVERR / IPV6_RECVERR: ICMP errors are read from the socket's error queue as
/// sock_extended_err, frag-needed (ICMP type 3 code 4) and packet-too-big (ICMPv6 type 2) with
/// the MTU they name in ee_info; an error quoting too little of the datagram to name it — RFC 792
/// asks for the IP header and 8 bytes only, and the kernel takes that on the quoted addresses
/// and ports — is the datagram in flight's when that is larger than the MTU named). It reads
/// the MTU of the interface that holds the socket's source address (SIOCGIFMTU; IP_MTU /
/// IPV6_MTU of the connected socket when none does), then
/// searches (search.h) between min_size and the smaller of max_size and that MTU, and below
/// min_size when it does not cross (or an ICMP error names less), down to the protocol's
/// smallest MTU (IPv4 68, RFC 791; IPv6 1280, RFC 8200; a named MTU below it is tried at it: the
/// kernel learns no IPv6 path MTU below 1280):
///  - forward: requests of the size searched that ask for a small acknowledgement
///    (wire/echo.h MtuMode::kAck), so a loss is the forward path's;
///  - reverse: requests of the size searched that ask for themselves back, sent with DF
///    (MtuMode::kReturn), up to the forward answer: the request crossed forward
///    at that size, so a loss is the return path's. No reply is larger than its request (the
///    responder is no amplifier), so the reverse answer is at most the forward one: equal to
///    it means "at least that much" (the peer's own probe, whose forward is this reverse,
///    measures above it). The responder's kernel refusing the reply (EMSGSIZE: it learned a
///    smaller path MTU from an ICMP error) comes back as a small answer: that direction's ICMP
///    works. A responder that echoes the request whole (an older podnet) gives the forward
///    search both directions' answer and no reverse one.
/// Datagrams go one at a time (the next when the last is answered, refused or timed out), at
/// most max_datagrams a direction; a datagram lost with no error is sent once more before its
/// size counts as too big. A datagram the local kernel does not let leave (send(2) fails, e.g.
/// ENOBUFS: a veth whose host side has a smaller MTU drops it, with no ICMP error; udp(7)) is
/// such a loss, counted at once: the search goes on, and the answer is the largest size that
/// left and crossed, a black hole above it (every other sender's datagram vanishes there).
///
/// Series per peer (labels: metrics::PeerLabels): podnet_path_mtu_bytes{direction} (the largest
/// IP packet, headers included, that crossed in the last round; 0 when nothing did),
/// podnet_path_mtu_black_hole{direction} (1: sizes above it lost with no error while it crossed),
/// podnet_path_mtu_icmp_bytes (the MTU the last ICMP error for this peer named; added at the
/// first one), podnet_path_mtu_interface_bytes; podnet_probe_{sent,received}_bytes_total
/// {probe="mtu"} (IP packets, headers included) and podnet_probe_errors_total{probe="mtu"} with
/// reason "socket" | "send_failed" (a datagram the local kernel did not send: a loss, the round
/// goes on) | "unreachable" (nothing crossed forward, not even the protocol's smallest size) |
/// "no_reverse" (the responder answered no reverse request: an older podnet, or its budget).
std::shared_ptr<ProbeKind> MakeMtuKind(const MtuOptions& options, ProbeEnv& env);

/// The series this kind exports from one Pod, once every probe has run a round and every answer
/// was the healthy one: its families into `n` (probes/series_estimate.h); returns how many
/// podnet_probe_sent_bytes_total series it adds (as many received). `c` turns the kind on.
std::size_t CountSeries(const config::Config& c, SeriesCounter& n);

/// The MTU of the interface holding the local address of connected socket `fd` (SIOCGIFMTU),
/// else the connected socket's IP_MTU / IPV6_MTU; 0 when neither is known.
int InterfaceMtu(int fd, bool v6);

}  // namespace podnet::probes::mtu
