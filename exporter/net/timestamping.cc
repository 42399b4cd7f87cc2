#include "exporter/net/timestamping.h"

#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <time.h>

#include <cerrno>
#include <cstring>

namespace podnet::net {

std::int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

namespace {
std::int64_t ToNs(const timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

TimestampingMode EnableTimestamping(int fd) {
  TimestampingMode mode;
  unsigned flags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_TX_SOFTWARE |
                   SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_ID |
                   SOF_TIMESTAMPING_OPT_TSONLY;
  if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) == 0) {
    mode.rx_kernel = true;
    mode.tx_kernel = true;
    return mode;
  }
  int on = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) == 0) mode.rx_kernel = true;
  return mode;
}

bool ReceiveDatagram(int fd, std::span<std::uint8_t> buffer, Datagram* out) {
  iovec iov{buffer.data(), buffer.size()};
  alignas(cmsghdr) char control[256];
  msghdr msg{};
  msg.msg_name = &out->from;
  msg.msg_namelen = sizeof out->from;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
  if (n < 0) return false;
  out->size =
      static_cast<std::size_t>(n) < buffer.size() ? static_cast<std::size_t>(n) : buffer.size();
  out->from_len = msg.msg_namelen;
  out->rx_kernel = false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET) continue;
    if (c->cmsg_type == SO_TIMESTAMPING) {
      scm_timestamping ts{};
      std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
      if (ts.ts[0].tv_sec != 0 || ts.ts[0].tv_nsec != 0) {
        out->rx_ns = ToNs(ts.ts[0]);
        out->rx_kernel = true;
      }
    } else if (c->cmsg_type == SO_TIMESTAMPNS) {
      timespec ts{};
      std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
      out->rx_ns = ToNs(ts);
      out->rx_kernel = true;
    }
  }
  if (!out->rx_kernel) out->rx_ns = RealtimeNs();
  return true;
}

std::optional<TxStamp> ReadTxStamp(int fd) {
  for (int attempts = 0; attempts < 64; ++attempts) {  // bounded: skip non-stamp entries
    alignas(cmsghdr) char control[256];
    std::uint8_t data[64];
    iovec iov{data, sizeof data};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return std::nullopt;
    std::optional<std::int64_t> ns;
    std::optional<std::uint32_t> key;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPING) {
        scm_timestamping ts{};
        std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
        if (ts.ts[0].tv_sec != 0 || ts.ts[0].tv_nsec != 0) ns = ToNs(ts.ts[0]);
      } else {
        // IP_RECVERR / IPV6_RECVERR level carries the sock_extended_err with the OPT_ID key.
        sock_extended_err err{};
        if (c->cmsg_len >= CMSG_LEN(sizeof err)) {
          std::memcpy(&err, CMSG_DATA(c), sizeof err);
          if (err.ee_errno == ENOMSG && err.ee_origin == SO_EE_ORIGIN_TIMESTAMPING) {
            key = err.ee_data;
          }
        }
      }
    }
    if (ns && key) return TxStamp{*key, *ns};
  }
  return std::nullopt;
}

}  // namespace podnet::net
