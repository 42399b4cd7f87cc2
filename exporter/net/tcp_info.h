#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace podnet::net {

/// The part of the kernel's TCP_INFO (linux/tcp.h struct tcp_info, getsockopt(IPPROTO_TCP,
/// TCP_INFO)) the burst engine uses, in base units. Fields newer than the running kernel read 0.
struct TcpInfo {
  std::uint32_t rtt_us = 0;          // tcpi_rtt: the sender's smoothed RTT (µs)
  std::uint32_t rttvar_us = 0;       // tcpi_rttvar (µs)
  std::uint32_t total_retrans = 0;   // tcpi_total_retrans: segments retransmitted, whole life
  std::uint64_t snd_cwnd_bytes = 0;  // tcpi_snd_cwnd (segments) × tcpi_snd_mss (bytes)
  std::uint32_t snd_mss = 0;         // tcpi_snd_mss (bytes)
  std::uint32_t pmtu = 0;            // tcpi_pmtu: path MTU (bytes)
  std::uint32_t reord_seen = 0;      // tcpi_reord_seen: reordering events (Linux ≥ 4.19)
  std::uint64_t bytes_sent = 0;      // tcpi_bytes_sent: payload incl. retransmits (≥ 4.19)
  std::uint64_t bytes_acked = 0;     // tcpi_bytes_acked
  std::uint64_t bytes_received = 0;  // tcpi_bytes_received
  std::uint32_t segs_out = 0;        // tcpi_segs_out: segments sent, retransmits included
  std::uint32_t segs_in = 0;         // tcpi_segs_in
  std::uint32_t notsent_bytes = 0;   // tcpi_notsent_bytes: written, not yet sent (≥ 4.6)
  std::uint8_t state = 0;            // tcpi_state: TCP_ESTABLISHED (1), TCP_CLOSE_WAIT (8), ...
};

/// Reads TCP_INFO of a TCP socket; std::nullopt when getsockopt fails (errno is left set).
std::optional<TcpInfo> ReadTcpInfo(int fd);

/// The TcpInfo of a kernel struct tcp_info of `len` bytes (as getsockopt or sock_diag's
/// INET_DIAG_INFO attribute give it; a shorter one, from an older kernel, reads 0 beyond).
TcpInfo TcpInfoFromKernel(const void* data, std::size_t len);

/// Bytes of IP + TCP header per segment on a Linux connection with timestamps (RFC 7323, the
/// Linux default): 20 + 32 for IPv4, 40 + 32 for IPv6. For wire-byte estimates from segment
/// counts (the cost model counts what crosses the zone boundary, headers included).
constexpr std::uint64_t TcpIpHeaderBytes(bool v6) { return (v6 ? 40 : 20) + 32; }

/// Bytes one TCP connection moved at the IP layer, as podnet_probe_sent_bytes_total and
/// podnet_probe_received_bytes_total count them: payload plus an IP + TCP header per segment.
struct WireBytes {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  WireBytes& operator+=(const WireBytes& o) {
    sent += o.sent;
    received += o.received;
    return *this;
  }
};

/// The wire bytes of a connection so far, from its TCP_INFO: tcpi_bytes_sent (retransmits
/// included; tcpi_bytes_acked on kernels before 4.19) and tcpi_bytes_received, plus
/// TcpIpHeaderBytes(v6) for each of tcpi_segs_out / tcpi_segs_in (SYN, pure ACKs and FIN
/// included), and 8 bytes each for the SYN's and SYN-ACK's longer options: for a connection
/// this end opened. Error: segments with SACK blocks carry 8–32 more header bytes, a connection
/// without timestamps 12 fewer per segment; a GSO segment counts as the wire segments it becomes.
WireBytes ConnectionWireBytes(const TcpInfo& ti, bool v6);

/// The segments of the orderly close that follow close(2) on a connection in `state`, which
/// TCP_INFO read before the close cannot count: ESTABLISHED sends FIN and the last ACK and gets
/// the peer's FIN-ACK; CLOSE_WAIT (the peer's FIN already counted) sends FIN and gets its ACK;
/// any other state (failed connect, reset) nothing more.
WireBytes CloseWireBytes(std::uint8_t state, bool v6);

/// What was charged of one connection's cumulative WireBytes: Charge(total) returns what is new
/// since the last call (all of it at the first) and remembers total.
struct WireMeter {
  WireBytes charged;
  WireBytes Charge(const WireBytes& total) {
    WireBytes d{total.sent >= charged.sent ? total.sent - charged.sent : 0,
                total.received >= charged.received ? total.received - charged.received : 0};
    charged = total;
    return d;
  }
};

/// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID) and its user/system split
/// (getrusage(RUSAGE_THREAD)), in seconds.
struct ThreadCpu {
  double total = 0;
  double user = 0;
  double system = 0;
};
ThreadCpu ReadThreadCpu();

}  // namespace podnet::net
