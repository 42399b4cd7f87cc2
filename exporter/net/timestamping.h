#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <span>

namespace podnet::net {

/// CLOCK_REALTIME in nanoseconds: the clock of the kernel's software timestamps.
std::int64_t RealtimeNs();

/// What EnableTimestamping got from the kernel.
struct TimestampingMode {
  bool rx_kernel = false;  // SCM_TIMESTAMPING software RX stamps on received packets
  bool tx_kernel = false;  // software TX stamps on the error queue, keyed by OPT_ID
};

/// Asks for software RX and TX timestamps (SO_TIMESTAMPING with SOF_TIMESTAMPING_RX_SOFTWARE |
/// TX_SOFTWARE | SOFTWARE | OPT_ID | OPT_TSONLY; Documentation/networking/timestamping.rst).
/// Falls back to SO_TIMESTAMPNS (RX only) and then to nothing; never fails.
TimestampingMode EnableTimestamping(int fd);

/// One datagram read by ReceiveDatagram.
struct Datagram {
  std::size_t size = 0;  // bytes stored in the buffer (truncated to its size)
  sockaddr_storage from{};
  socklen_t from_len = 0;
  std::int64_t rx_ns = 0;  // kernel RX stamp, or RealtimeNs() after recvmsg without one
  bool rx_kernel = false;
};

/// recvmsg(MSG_DONTWAIT) of one datagram with its RX timestamp. Returns false when nothing is
/// queued (EAGAIN) or on error (errno set).
bool ReceiveDatagram(int fd, std::span<std::uint8_t> buffer, Datagram* out);

/// One TX timestamp from the socket error queue: `key` is the OPT_ID counter of the send
/// (0 for the first datagram after EnableTimestamping, then +1 per datagram).
struct TxStamp {
  std::uint32_t key = 0;
  std::int64_t ns = 0;
};

/// Reads the next TX timestamp from the error queue (recvmsg MSG_ERRQUEUE|MSG_DONTWAIT),
/// skipping anything else queued there. std::nullopt when the queue is empty.
std::optional<TxStamp> ReadTxStamp(int fd);

}  // namespace podnet::net
