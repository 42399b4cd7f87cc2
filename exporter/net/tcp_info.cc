#include "exporter/net/tcp_info.h"

// linux/tcp.h, not netinet/tcp.h: glibc's copy of struct tcp_info stops before the byte and
// segment counters (tcpi_bytes_sent, tcpi_segs_out, ...).
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include <cstring>

namespace podnet::net {

std::optional<TcpInfo> ReadTcpInfo(int fd) {
  struct tcp_info ti;
  std::memset(&ti, 0, sizeof ti);
  socklen_t len = sizeof ti;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return std::nullopt;
  // An older kernel fills a prefix (len says how much); the rest stays 0 from the memset.
  TcpInfo out;
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
