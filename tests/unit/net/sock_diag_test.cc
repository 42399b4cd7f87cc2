#include "exporter/net/sock_diag.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/ip/address.hpp>
#include <cstring>
#include <string>

#include "exporter/net/tcp_info.h"

namespace podnet::net {
namespace {

// A connected pair on loopback: `client` (IPv4, or IPv6 dual-stack to ::ffff:127.0.0.1, as gRPC
// connects) to a listener of 127.0.0.1 on `port`, and the accepted `server` end.
struct Pair {
  int listener = -1, client = -1, server = -1;
  std::uint16_t port = 0;
  explicit Pair(bool dual_stack) {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(listener, 1), 0);
    EXPECT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port = ntohs(a.sin_port);
    if (dual_stack) {
      client = socket(AF_INET6, SOCK_STREAM, 0);
      sockaddr_in6 b{};
      b.sin6_family = AF_INET6;
      b.sin6_port = a.sin_port;
      inet_pton(AF_INET6, "::ffff:127.0.0.1", &b.sin6_addr);
      EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&b), sizeof b), 0);
    } else {
      client = socket(AF_INET, SOCK_STREAM, 0);
      EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    }
    server = accept(listener, nullptr, nullptr);
    EXPECT_GE(server, 0);
  }
  ~Pair() {
    for (int fd : {listener, client, server}) {
      if (fd >= 0) close(fd);
    }
  }
};

// Moves n bytes from `from` to `to` (blocking, loopback).
void Move(int from, int to, std::size_t n) {
  std::string buf(n, 'x');
  ASSERT_EQ(send(from, buf.data(), n, 0), static_cast<ssize_t>(n));
  std::size_t got = 0;
  for (int i = 0; i < 1000 && got < n; ++i) {
    ssize_t r = recv(to, buf.data(), n - got, 0);
    ASSERT_GT(r, 0);
    got += static_cast<std::size_t>(r);
  }
  ASSERT_EQ(got, n);
}

std::uint64_t Inode(int fd) {
  struct stat st {};
  EXPECT_EQ(fstat(fd, &st), 0);
  return st.st_ino;
}

void FindsTheClientSocket(bool dual_stack) {
  Pair p(dual_stack);
  Move(p.client, p.server, 1000);
  Move(p.server, p.client, 500);
  auto direct = ReadTcpInfo(p.client);
  ASSERT_TRUE(direct);
  auto found = OwnTcpSocketsTo(boost::asio::ip::make_address("127.0.0.1"), p.port);
  ASSERT_TRUE(found.has_value()) << std::strerror(errno);
  // Only the client end: the listener listens, the accepted end's peer port is the client's.
  ASSERT_EQ(found->size(), 1u);
  EXPECT_EQ((*found)[0].inode, Inode(p.client));
  const TcpInfo& diag = (*found)[0].info;
  EXPECT_EQ(diag.bytes_received, 500u);
  EXPECT_EQ(diag.bytes_received, direct->bytes_received);
  EXPECT_EQ(diag.bytes_acked, direct->bytes_acked);
  // The same counters as getsockopt's, read a moment later: a delayed ACK may have gone out.
  EXPECT_GE(diag.segs_out, direct->segs_out);
  EXPECT_LE(diag.segs_out, direct->segs_out + 1);
  EXPECT_GE(diag.segs_out, 2u);  // the SYN, the data
  if (diag.bytes_sent > 0) {
    EXPECT_EQ(diag.bytes_sent, 1000u);  // kernels >= 4.19
  }
  // Wire bytes: payload plus one 20 + 32 byte header per segment (IPv4 on the wire), 8 more
  // for the SYN's and SYN-ACK's options.
  WireBytes w = ConnectionWireBytes(diag, /*v6=*/false);
  EXPECT_EQ(w.sent, 1000u + diag.segs_out * 52u + 8);
  EXPECT_EQ(w.received, 500u + diag.segs_in * 52u + 8);
  // Another port has none of this process's sockets.
  auto none = OwnTcpSocketsTo(boost::asio::ip::make_address("127.0.0.1"),
                              static_cast<std::uint16_t>(p.port == 65535 ? 1 : p.port + 1));
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
}

TEST(SockDiagTest, FindsThisProcessesConnectionToAPeerWithItsTcpInfo) {
  FindsTheClientSocket(/*dual_stack=*/false);
}

TEST(SockDiagTest, FindsADualStackSocketConnectedToAMappedAddress) {
  FindsTheClientSocket(/*dual_stack=*/true);
}

TEST(WireMeterTest, ChargesOnlyWhatIsNew) {
  WireMeter m;
  WireBytes d = m.Charge({100, 50});
  EXPECT_EQ(d.sent, 100u);
  EXPECT_EQ(d.received, 50u);
  d = m.Charge({130, 50});
  EXPECT_EQ(d.sent, 30u);
  EXPECT_EQ(d.received, 0u);
}

TEST(CloseWireBytesTest, CountsTheSegmentsOfAnOrderlyClose) {
  // ESTABLISHED: FIN and last ACK out, FIN-ACK in; CLOSE_WAIT: FIN out, ACK in; else none.
  EXPECT_EQ(CloseWireBytes(1, false).sent, 2u * 52);
  EXPECT_EQ(CloseWireBytes(1, false).received, 52u);
  EXPECT_EQ(CloseWireBytes(8, true).sent, 72u);
  EXPECT_EQ(CloseWireBytes(7, false).sent, 0u);
}

}  // namespace
}  // namespace podnet::net
