#pragma once

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
};

/// Reads TCP_INFO of a TCP socket; std::nullopt when getsockopt fails (errno is left set).
std::optional<TcpInfo> ReadTcpInfo(int fd);

/// Bytes of IP + TCP header per segment on a Linux connection with timestamps (RFC 7323, the
/// Linux default): 20 + 32 for IPv4, 40 + 32 for IPv6. For wire-byte estimates from segment
/// counts (the cost model counts what crosses the zone boundary, headers included).
constexpr std::uint64_t TcpIpHeaderBytes(bool v6) { return (v6 ? 40 : 20) + 32; }

/// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID) and its user/system split
/// (getrusage(RUSAGE_THREAD)), in seconds.
struct ThreadCpu {
  double total = 0;
  double user = 0;
  double system = 0;
};
ThreadCpu ReadThreadCpu();

}  // namespace podnet::net
