#include "exporter/net/tcp_info.h"

// linux/tcp.h, not netinet/tcp.h: glibc's copy of struct tcp_info stops before the byte and
// segment counters (tcpi_bytes_sent, tcpi_segs_out, ...).
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cstring>

namespace podnet::net {

namespace {

// Socket states of include/net/tcp_states.h (netinet/tcp.h has them, but clashes with
// linux/tcp.h).
constexpr unsigned kEstablished = 1, kCloseWait = 8;

// An older kernel fills a prefix of struct tcp_info; the rest must be 0.
TcpInfo FromKernel(const struct tcp_info& ti) {
  TcpInfo out;
  out.state = ti.tcpi_state;
  out.rtt_us = ti.tcpi_rtt;
  out.rttvar_us = ti.tcpi_rttvar;
  out.total_retrans = ti.tcpi_total_retrans;
  out.snd_mss = ti.tcpi_snd_mss;
  out.snd_cwnd_bytes = std::uint64_t{ti.tcpi_snd_cwnd} * ti.tcpi_snd_mss;
  out.pmtu = ti.tcpi_pmtu;
  out.reord_seen = ti.tcpi_reord_seen;
  out.bytes_sent = ti.tcpi_bytes_sent;
  out.bytes_acked = ti.tcpi_bytes_acked;
  out.bytes_received = ti.tcpi_bytes_received;
  out.segs_out = ti.tcpi_segs_out;
  out.segs_in = ti.tcpi_segs_in;
  out.notsent_bytes = ti.tcpi_notsent_bytes;
  return out;
}

}  // namespace

std::optional<TcpInfo> ReadTcpInfo(int fd) {
  struct tcp_info ti;
  std::memset(&ti, 0, sizeof ti);
  socklen_t len = sizeof ti;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return std::nullopt;
  return FromKernel(ti);
}

TcpInfo TcpInfoFromKernel(const void* data, std::size_t len) {
  struct tcp_info ti;
  std::memset(&ti, 0, sizeof ti);
  std::memcpy(&ti, data, std::min(len, sizeof ti));
  return FromKernel(ti);
}

WireBytes ConnectionWireBytes(const TcpInfo& ti, bool v6) {
  std::uint64_t hdr = TcpIpHeaderBytes(v6);
  std::uint64_t payload = ti.bytes_sent > 0 ? ti.bytes_sent : ti.bytes_acked;
  // The SYN and the SYN-ACK carry 20 option bytes (MSS, SACK-permitted, timestamps, window
  // scale), 8 more than the others' timestamps.
  constexpr std::uint64_t kSynExtra = 8;
  return {payload + std::uint64_t{ti.segs_out} * hdr + (ti.segs_out > 0 ? kSynExtra : 0),
          ti.bytes_received + std::uint64_t{ti.segs_in} * hdr + (ti.segs_in > 0 ? kSynExtra : 0)};
}

WireBytes CloseWireBytes(std::uint8_t state, bool v6) {
  std::uint64_t hdr = TcpIpHeaderBytes(v6);
  if (state == kEstablished) return {2 * hdr, hdr};
  if (state == kCloseWait) return {hdr, hdr};
  return {};
}

ThreadCpu ReadThreadCpu() {
  ThreadCpu c;
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
    c.total = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }
  rusage ru{};
  if (getrusage(RUSAGE_THREAD, &ru) == 0) {
    c.user = static_cast<double>(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec * 1e-6;
    c.system = static_cast<double>(ru.ru_stime.tv_sec) + ru.ru_stime.tv_usec * 1e-6;
  }
  return c;
}

}  // namespace podnet::net
