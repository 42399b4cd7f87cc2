#pragma once

#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <optional>
#include <vector>

#include "exporter/net/tcp_info.h"

namespace podnet::net {

/// One TCP socket of this process, found by sock_diag (NETLINK_SOCK_DIAG, the interface of
/// `ss -ti`): its inode (sockfs, as in /proc/self/fd) and TCP_INFO.
struct OwnTcpSocket {
  std::uint64_t inode = 0;
  TcpInfo info;
};

/// The TCP sockets of this process (an inode among /proc/self/fd's) in the network namespace
/// connected to `peer`:`port` (IPv4-mapped IPv6 peers are matched as IPv4 too), for
/// connections a library opens whose file descriptor the caller never sees (gRPC's channels).
/// Sockets in TIME_WAIT or without a file descriptor are not included. std::nullopt when the
/// netlink dump fails (errno left set). Cost: one dump of the namespace's TCP sockets and a
/// readlink per open file descriptor.
std::optional<std::vector<OwnTcpSocket>> OwnTcpSocketsTo(const boost::asio::ip::address& peer,
                                                         std::uint16_t port);

}  // namespace podnet::net
