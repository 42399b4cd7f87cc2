#include "exporter/responders/udp_echo.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "exporter/wire/echo.h"
#include "tests/unit/testing/bytes.h"
#include "tests/unit/testing/ci.h"
#include "tests/unit/testing/loop.h"

namespace podnet::responders {
namespace {

using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;
using podnet::testing::CounterValue;
using podnet::testing::Eventually;
using podnet::testing::Ipv6LoopbackWorks;
using podnet::testing::LoopThread;
using podnet::testing::Truncated;
using podnet::testing::WithByte;
namespace echo = wire::echo;

constexpr const char* kFamily = "podnet_responder_requests_total";

// A plain UDP client socket with a receive timeout, so that no test can hang.
class Client {
 public:
  explicit Client(bool v6 = false) : v6_(v6) {
    fd_ = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    SetTimeout(1000ms);
  }
  ~Client() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  void SetTimeout(std::chrono::milliseconds t) {
    timeval tv{static_cast<time_t>(t.count() / 1000),
               static_cast<suseconds_t>(t.count() % 1000 * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }

  // Sends from `address` (any 127/8 address is local): another source for the responder.
  bool Bind(const char* address) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, address, &a.sin_addr);
    return bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }

  bool SendTo(const Bytes& data, std::uint16_t port) {
    sockaddr_storage ss{};
    socklen_t len;
    if (v6_) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
      a->sin6_family = AF_INET6;
      a->sin6_port = htons(port);
      a->sin6_addr = in6addr_loopback;
      len = sizeof *a;
    } else {
      auto* a = reinterpret_cast<sockaddr_in*>(&ss);
      a->sin_family = AF_INET;
      a->sin_port = htons(port);
      a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      len = sizeof *a;
    }
    return sendto(fd_, data.data(), data.size(), 0, reinterpret_cast<sockaddr*>(&ss), len) ==
           static_cast<ssize_t>(data.size());
  }

  // One datagram and the port it came from; std::nullopt on timeout.
  std::optional<std::pair<Bytes, std::uint16_t>> Receive() {
    Bytes buf(65536);
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    ssize_t n = recvfrom(fd_, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &len);
    if (n < 0) return std::nullopt;
    buf.resize(static_cast<std::size_t>(n));
    std::uint16_t port = from.ss_family == AF_INET6
                             ? ntohs(reinterpret_cast<sockaddr_in6*>(&from)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&from)->sin_port);
    return std::pair{std::move(buf), port};
  }

 private:
  int fd_ = -1;
  bool v6_;
};

Bytes Request(std::uint16_t seq, std::uint64_t token, std::size_t size = 56) {
  return echo::EncodePayload({echo::Kind::kRequest, seq, token}, size);
}

class UdpEchoTest : public ::testing::Test {
 protected:
  // `rate`: replies per second overall; `share`: the most one source may take of it.
  void Start(double rate = 20000, const char* listen = "127.0.0.1", double share = 1) {
    net::HostPort hp{boost::asio::ip::make_address(listen), 0};
    EchoLimits limits;
    limits.replies_per_second = rate;
    limits.source_share = share;
    responder_ = loop_.Run(
        [&] { return std::make_unique<UdpEchoResponder>(loop_.io(), hp, registry_, limits); });
    port_ = responder_->port();
    ASSERT_NE(port_, 0);
  }

  void TearDown() override {
    loop_.Run([&] { responder_.reset(); });
    loop_.Stop();
  }

  double Count(const char* result) {
    return CounterValue(registry_, kFamily, {{"responder", "udp_echo"}, {"result", result}});
  }
  double Dropped(const char* reason) {
    return CounterValue(registry_, "podnet_responder_dropped_total",
                        {{"responder", "udp_echo"}, {"reason", reason}});
  }

  prometheus::Registry registry_;
  LoopThread loop_;
  std::unique_ptr<UdpEchoResponder> responder_;
  std::uint16_t port_ = 0;
};

TEST_F(UdpEchoTest, AnswersRequestsWithReplyKind) {
  Start();
  Client c;
  ASSERT_TRUE(c.ok());
  // Sizes: the bare header, ping's default, a full 1500-byte Ethernet frame's UDP payload.
  std::uint16_t seq = 0;
  for (std::size_t size : {std::size_t{16}, std::size_t{56}, std::size_t{1472}}) {
    SCOPED_TRACE("size " + std::to_string(size));
    ++seq;
    Bytes req = Request(seq, 0xC0FFEE00 + seq, size);
    ASSERT_TRUE(c.SendTo(req, port_));
    auto got = c.Receive();
    ASSERT_TRUE(got.has_value()) << "no reply";
    EXPECT_EQ(got->second, port_) << "the reply must come from the responder's port";
    auto h = echo::DecodePayload(got->first);
    ASSERT_TRUE(h.has_value());
    EXPECT_EQ(h->kind, echo::Kind::kReply);
    EXPECT_EQ(h->seq, seq);
    EXPECT_EQ(h->token, 0xC0FFEE00 + seq);
    // Everything but the kind byte comes back as sent.
    Bytes want = req;
    want[5] = static_cast<std::uint8_t>(echo::Kind::kReply);
    EXPECT_EQ(got->first, want);
  }
  EXPECT_TRUE(Eventually([&] { return Count("answered") == 3; })) << Count("answered");
  EXPECT_EQ(Count("ignored"), 0);
  EXPECT_EQ(Count("rate_limited"), 0);
}

TEST_F(UdpEchoTest, RepliesCarryTheIdentityWhenAskedAndSetNeverGrowing) {
  Start();
  Client c;
  ASSERT_TRUE(c.ok());
  auto ask = [&](std::uint16_t seq, std::size_t size) {
    Bytes req = Request(seq, 77, size);
    echo::AskIdentity(req);
    EXPECT_TRUE(c.SendTo(req, port_));
    auto got = c.Receive();
    EXPECT_TRUE(got.has_value());
    if (got) {
      EXPECT_EQ(got->first.size(), size);
    }
    return got ? got->first : Bytes{};
  };
  echo::Identity id;
  // Before SetIdentity: answered, no identity.
  EXPECT_EQ(echo::ReadIdentity(ask(1, echo::kIdentityPayloadSize), &id),
            echo::IdentityRead::kAbsent);
  loop_.Run([&] {
    responder_->SetIdentity("node-b", "zone-2");
    return 0;
  });
  EXPECT_EQ(echo::ReadIdentity(ask(2, echo::kIdentityPayloadSize), &id),
            echo::IdentityRead::kPresent);
  EXPECT_EQ(id, (echo::Identity{"node-b", "zone-2", ""}));
  // No room: answered as before (RTT probes of size 56 still asking get no record, no growth).
  EXPECT_EQ(echo::ReadIdentity(ask(3, 24), &id), echo::IdentityRead::kAbsent);
  // The zone changes (read from the Node later): the next reply says so.
  loop_.Run([&] {
    responder_->SetIdentity("node-b", "zone-3");
    return 0;
  });
  EXPECT_EQ(echo::ReadIdentity(ask(4, 64), &id), echo::IdentityRead::kPresent);
  EXPECT_EQ(id.zone, "zone-3");
}

TEST_F(UdpEchoTest, DiscoveryAsksGetThePodButDoNotCountAsAProber) {
  Start();
  std::atomic<int> heard{0};
  loop_.Run([&] {
    responder_->SetIdentity("node-b", "zone-2", "podnet-b");
    responder_->SetHeardHook([&](const boost::asio::ip::address&) { ++heard; });
    return 0;
  });
  Client c;
  ASSERT_TRUE(c.ok());
  Bytes req = Request(1, 77, echo::kIdentityPodPayloadSize);
  echo::AskIdentity(req, /*discovery=*/true);
  EXPECT_TRUE(echo::IsDiscoveryAsk(req));
  ASSERT_TRUE(c.SendTo(req, port_));
  auto got = c.Receive();
  ASSERT_TRUE(got.has_value());
  echo::Identity id;
  ASSERT_EQ(echo::ReadIdentity(got->first, &id), echo::IdentityRead::kPresent);
  EXPECT_EQ(id, (echo::Identity{"node-b", "zone-2", "podnet-b"}));
  EXPECT_EQ(heard.load(), 0);  // every Pod asks every Pod: nobody's coverage
  // A probe's request (identity asked or not) is a prober heard.
  Bytes probe = Request(2, 77, 64);
  ASSERT_TRUE(c.SendTo(probe, port_));
  ASSERT_TRUE(c.Receive().has_value());
  EXPECT_TRUE(Eventually([&] { return heard.load() == 1; }));
}

struct BadDatagram {
  std::string name;
  Bytes data;
};

void PrintTo(const BadDatagram& c, std::ostream* os) { *os << c.name; }

class UdpEchoIgnoresTest : public UdpEchoTest, public ::testing::WithParamInterface<BadDatagram> {};

TEST_P(UdpEchoIgnoresTest, DoesNotAnswer) {
  Start();
  Client c;
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.SendTo(GetParam().data, port_));
  // A valid request sent after it: its reply must be the first datagram that comes back (the
  // responder reads in order), so the bad one was not answered.
  ASSERT_TRUE(c.SendTo(Request(77, 0x77), port_));
  auto got = c.Receive();
  ASSERT_TRUE(got.has_value());
  auto h = echo::DecodePayload(got->first);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->token, 0x77u) << "the bad datagram was answered";
  // And nothing else arrives.
  c.SetTimeout(150ms);
  EXPECT_FALSE(c.Receive().has_value());
  EXPECT_TRUE(Eventually([&] { return Count("ignored") == 1 && Count("answered") == 1; }))
      << "ignored " << Count("ignored") << " answered " << Count("answered");
  EXPECT_EQ(Count("rate_limited"), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Table, UdpEchoIgnoresTest,
    ::testing::Values(
        BadDatagram{"garbage", Bytes{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l',
                                     'd', ' ', 'g', 'a', 'r', 'b', 'a', 'g', 'e', '!'}},
        BadDatagram{"reply_kind", echo::EncodePayload({echo::Kind::kReply, 1, 2}, 56)},
        BadDatagram{"short", Truncated(Request(1, 2), 15)},
        BadDatagram{"wrong_magic", WithByte(Request(1, 2), 0, 'X')},
        BadDatagram{"wrong_version", WithByte(Request(1, 2), 4, 9)}, BadDatagram{"empty", Bytes{}}),
    [](const auto& info) { return info.param.name; });

TEST_F(UdpEchoTest, RateLimited) {
  Start(/*rate=*/10);
  Client c;
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(c.SendTo(Request(i, 1000 + i), port_));
  int answers = 0;
  c.SetTimeout(300ms);
  while (c.Receive()) ++answers;
  // At most one second's worth of burst plus what refills while the 100 go out.
  EXPECT_GE(answers, 1);
  EXPECT_LE(answers, 20);
  ASSERT_TRUE(Eventually([&] { return Count("answered") + Count("rate_limited") == 100; }))
      << "answered " << Count("answered") << " rate_limited " << Count("rate_limited");
  EXPECT_EQ(Count("answered"), answers);
  EXPECT_EQ(Count("ignored"), 0);
  EXPECT_EQ(Dropped("rate_limited"), Count("rate_limited"));
  EXPECT_EQ(Dropped("malformed"), 0);
  // The limit is a rate, not a quota: after a pause, requests are answered again.
  std::this_thread::sleep_for(250ms);
  c.SetTimeout(1000ms);
  ASSERT_TRUE(c.SendTo(Request(500, 500), port_));
  auto got = c.Receive();
  ASSERT_TRUE(got.has_value()) << "not answered after the bucket refilled";
  EXPECT_EQ(echo::DecodePayload(got->first)->token, 500u);
}

// The break test: one sender flooding valid requests made a legitimate prober lose half its
// packets (the budget was global). Now the flooder is held to its share: the prober, from another
// address, gets every reply. Each probe is sent before a flood burst, so a full socket buffer
// would drop the flood's datagrams, not the probe's.
TEST_F(UdpEchoTest, OneFloodingSourceDoesNotStarveAnother) {
  Start(/*rate=*/2000, "127.0.0.1", /*share=*/1.0 / 16);
  Client prober, flooder;
  ASSERT_TRUE(prober.ok() && flooder.ok());
  ASSERT_TRUE(flooder.Bind("127.0.0.2"));
  constexpr int kProbes = 20, kFloodPerProbe = 200;
  for (int i = 0; i < kProbes; ++i) {
    ASSERT_TRUE(prober.SendTo(Request(i, 7000 + i), port_));
    for (int k = 0; k < kFloodPerProbe; ++k) flooder.SendTo(Request(k, 1), port_);
    std::this_thread::sleep_for(5ms);
  }
  int answers = 0;
  prober.SetTimeout(500ms);
  while (auto got = prober.Receive()) {
    if (echo::DecodePayload(got->first)->token >= 7000) ++answers;
  }
  EXPECT_EQ(answers, kProbes);
  EXPECT_GT(Count("source_limited"), 0);
  EXPECT_EQ(Count("rate_limited"), 0);
  // The flooder got at most its share: one second's burst (125) plus what refilled meanwhile.
  EXPECT_LE(Count("answered"), kProbes + 125 + 125);
}

// Replies are bounded in size: a 65,507-byte request (the break test reflected 541 MB of them in
// 0.36 s) is not answered; the largest probe size (9000) is.
TEST_F(UdpEchoTest, LargeRequestsAreNotReflected) {
  Start();
  Client c;
  ASSERT_TRUE(c.ok());
  auto big = Request(1, 1);
  big.resize(65507, 0x55);
  ASSERT_TRUE(c.SendTo(big, port_));
  auto largest = Request(2, 2);
  largest.resize(9000, 0x55);
  ASSERT_TRUE(c.SendTo(largest, port_));
  auto got = c.Receive();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->first.size(), 9000u);
  c.SetTimeout(200ms);
  EXPECT_FALSE(c.Receive().has_value());
  EXPECT_TRUE(Eventually([&] { return Count("too_large") == 1; })) << Count("too_large");
}

TEST_F(UdpEchoTest, IgnoredDatagramsDoNotSpendTheRate) {
  Start(/*rate=*/5);
  Client c;
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(c.SendTo(Bytes(40, 0xAB), port_));
  ASSERT_TRUE(c.SendTo(Request(1, 1), port_));
  auto got = c.Receive();
  ASSERT_TRUE(got.has_value()) << "garbage must not use up the replies";
  EXPECT_TRUE(Eventually([&] { return Count("ignored") == 50; })) << Count("ignored");
  EXPECT_EQ(Dropped("malformed"), 50);
  EXPECT_EQ(Dropped("rate_limited"), 0);
}

TEST_F(UdpEchoTest, SeriesAreInTheExposition) {
  Start();
  Client c;
  ASSERT_TRUE(c.SendTo(Request(1, 1), port_));
  ASSERT_TRUE(c.Receive().has_value());
  ASSERT_TRUE(c.SendTo(Bytes{1, 2, 3}, port_));
  ASSERT_TRUE(Eventually([&] { return Count("ignored") == 1; }));
  // Through the text format, as a scrape sees it.
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_.Collect());
  std::string text = out.str();
  EXPECT_NE(text.find(std::string(kFamily) + "{responder=\"udp_echo\",result=\"answered\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(std::string(kFamily) + "{responder=\"udp_echo\",result=\"ignored\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find(std::string(kFamily) + "{responder=\"udp_echo\",result=\"rate_limited\"} 0\n"),
      std::string::npos)
      << text;
}

// A request from UDP source port 0, written whole (UDP header and payload) through a raw socket:
// no UDP socket can send from port 0, and the kernel refuses a datagram to port 0 (EINVAL), so
// the responder's reply must fail. Returns errno when the raw socket cannot be had (it needs
// CAP_NET_RAW), 0 once sent.
int SendFromPortZero(const Bytes& payload, std::uint16_t port) {
  int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_UDP);
  if (fd < 0) return errno;
  Bytes datagram(8);
  std::uint16_t length = htons(static_cast<std::uint16_t>(8 + payload.size()));
  std::uint16_t to = htons(port);
  std::memcpy(&datagram[2], &to, 2);      // source port [0, 2) stays 0
  std::memcpy(&datagram[4], &length, 2);  // checksum [6, 8) stays 0: none, as IPv4 allows
  datagram.insert(datagram.end(), payload.begin(), payload.end());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ssize_t n =
      sendto(fd, datagram.data(), datagram.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
  int err = n == static_cast<ssize_t>(datagram.size()) ? 0 : errno;
  close(fd);
  return err;
}

// A reply the kernel refuses is neither answered nor lost from the counts: it is a drop,
// reason "send_failed", and the responder goes on answering.
TEST_F(UdpEchoTest, AReplyTheKernelRefusesIsCountedAsADrop) {
  Start();
  if (int err = SendFromPortZero(Request(1, 1), port_); err != 0) {
    PODNET_SKIP_UNLESS_CI("no raw UDP socket to send from port 0: " << std::strerror(err));
  }
  EXPECT_TRUE(Eventually([&] { return Count("send_failed") == 1; })) << Count("send_failed");
  EXPECT_EQ(Dropped("send_failed"), 1);
  EXPECT_EQ(Count("answered"), 0);
  Client c;
  ASSERT_TRUE(c.SendTo(Request(2, 2), port_));
  ASSERT_TRUE(c.Receive().has_value()) << "the responder stopped answering";
  EXPECT_TRUE(Eventually([&] { return Count("answered") == 1; })) << Count("answered");
  EXPECT_EQ(Count("send_failed"), 1);
}

TEST_F(UdpEchoTest, Ipv6WildcardAlsoAnswersIpv4) {
  if (!Ipv6LoopbackWorks()) GTEST_SKIP() << "no IPv6 loopback here";
  Start(20000, "::");
  for (bool v6 : {false, true}) {
    SCOPED_TRACE(v6 ? "IPv6 client" : "IPv4 client");
    Client c(v6);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.SendTo(Request(3, 33), port_));
    auto got = c.Receive();
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(echo::DecodePayload(got->first)->kind, echo::Kind::kReply);
  }
}

TEST_F(UdpEchoTest, PortInUseThrows) {
  // udp_echo.h: a listen address that cannot be bound throws (a start-up error). A second
  // responder on the same port must not silently share the port and take some of its traffic.
  Start();
  net::HostPort hp{boost::asio::ip::make_address("127.0.0.1"), port_};
  prometheus::Registry other;
  EXPECT_THROW(loop_.Run([&] { return std::make_unique<UdpEchoResponder>(loop_.io(), hp, other); }),
               boost::system::system_error);
}

// Datagrams the kernel drops for a full receive buffer (the responder's loop busy while a train
// arrives) are counted receive_buffer from SO_RXQ_OVFL, so the requests counted add up to the
// datagrams sent: none vanishes unaccounted.
TEST_F(UdpEchoTest, KernelDropsForAFullReceiveBufferAreCounted) {
  Start();
  Client c;
  ASSERT_TRUE(c.ok());
  // The loop blocked: nothing is read while 2,000 datagrams of 1,472 bytes (~6 MB of buffer at
  // their true size) arrive, far more than a default receive buffer holds.
  std::promise<void> release;
  std::promise<void> blocked;
  boost::asio::post(loop_.io(), [&] {
    blocked.set_value();
    release.get_future().wait();
  });
  blocked.get_future().wait();
  constexpr int kTrain = 2000;
  int sent = 0;
  for (std::uint16_t seq = 1; seq <= kTrain; ++seq) sent += c.SendTo(Request(seq, 8, 1472), port_);
  EXPECT_EQ(Count("receive_buffer"), -1) << "no series before the first drop is read";
  release.set_value();
  // The kernel's count comes with the next datagram queued after the drops: small ones follow
  // until every datagram sent is accounted for (one is enough once the queue has drained; one
  // sent while it is still full is dropped and counted by the next). Bounded: 100 x 100 ms.
  auto accounted = [&] {
    return Count("answered") + Count("rate_limited") + Count("source_limited") +
           std::max(0.0, Count("receive_buffer"));
  };
  bool balanced = false;
  for (std::uint16_t i = 1; i <= 100 && !balanced; ++i) {
    sent += c.SendTo(Request(kTrain + i, 8, 56), port_);
    balanced = Eventually([&] { return accounted() == sent; }, 100ms);
  }
  EXPECT_TRUE(balanced) << accounted() << " accounted for " << sent << " sent";
  EXPECT_GT(Count("receive_buffer"), 0) << "the buffer overflowed";
  EXPECT_EQ(Dropped("receive_buffer"), Count("receive_buffer"));
}

// The path-MTU record: a large request acknowledged small, a request asking for itself back
// sent back whole, a request asking for more than its own bytes not answered, a request without
// the record as before.
TEST_F(UdpEchoTest, MtuRequestsAreAcknowledgedSmallOrSentBackNeverLarger) {
  Start();
  Client c;
  ASSERT_TRUE(c.ok());
  Bytes big = Request(1, 5, 8973);
  ASSERT_TRUE(echo::AskMtu(big, echo::MtuMode::kAck, 0));
  ASSERT_TRUE(c.SendTo(big, port_));
  auto got = c.Receive();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->first.size(), echo::kMtuAckBytes);
  EXPECT_EQ(echo::ReadMtuAnswer(got->first)->size, 8973);

  Bytes back = Request(2, 5, 8973);
  ASSERT_TRUE(echo::AskMtu(back, echo::MtuMode::kReturn, 8973));
  ASSERT_TRUE(c.SendTo(back, port_));
  got = c.Receive();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->first.size(), 8973u);
  EXPECT_EQ(echo::DecodePayload(got->first)->seq, 2);
  EXPECT_EQ(echo::ReadMtuAnswer(got->first)->mode, echo::MtuMode::kReturn);

  // An amplifier's request: 8,973 bytes asked by 1,122 (the 1/8 an earlier podnet prober sent).
  // Not answered.
  Bytes greedy = Request(3, 5, 1122);
  ASSERT_TRUE(echo::AskMtu(greedy, echo::MtuMode::kReturn, 8973));
  c.SetTimeout(200ms);
  ASSERT_TRUE(c.SendTo(greedy, port_));
  EXPECT_FALSE(c.Receive().has_value());
  EXPECT_TRUE(Eventually([&] { return Count("too_large") == 1; })) << Count("too_large");

  // Without the record: as before, echoed whole.
  Bytes plain = Request(4, 5, 1400);
  ASSERT_TRUE(c.SendTo(plain, port_));
  c.SetTimeout(1000ms);
  got = c.Receive();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->first.size(), 1400u);
}

// Hostile path-MTU records: each gets at most its own bytes back, or nothing, and is counted once.
struct MtuCase {
  std::string name;
  Bytes data;
  std::size_t reply;   // bytes of the expected reply; 0: none
  std::string result;  // podnet_responder_requests_total{result}
};

void PrintTo(const MtuCase& c, std::ostream* os) { *os << c.name; }

Bytes MtuRequest(std::size_t size, echo::MtuMode mode, std::uint16_t asked) {
  Bytes b = Request(5, 0x55, size);
  echo::AskMtu(b, mode, asked);
  return b;
}

class UdpEchoMtuRecordTest : public UdpEchoTest, public ::testing::WithParamInterface<MtuCase> {};

TEST_P(UdpEchoMtuRecordTest, NeverAnswersLargerThanTheRequest) {
  const MtuCase& m = GetParam();
  Start();
  Client c;
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.SendTo(m.data, port_));
  ASSERT_TRUE(c.SendTo(Request(77, 0x77), port_));  // answered after it (read in order)
  auto got = c.Receive();
  ASSERT_TRUE(got.has_value());
  if (m.reply != 0) {
    EXPECT_EQ(echo::DecodePayload(got->first)->token, 0x55u);
    EXPECT_EQ(got->first.size(), m.reply);
    EXPECT_LE(got->first.size(), m.data.size());
    if (auto answer = echo::ReadMtuAnswer(got->first)) {
      EXPECT_EQ(answer->flags, 0);
    }
    got = c.Receive();
    ASSERT_TRUE(got.has_value());
  }
  EXPECT_EQ(echo::DecodePayload(got->first)->token, 0x77u) << "answered when it must not be";
  c.SetTimeout(150ms);
  EXPECT_FALSE(c.Receive().has_value());
  // Counted once, under its result (the plain request after it: answered).
  double want = m.result == "answered" ? 2 : 1;
  EXPECT_TRUE(Eventually([&] { return Count(m.result.c_str()) == want; }))
      << m.result << " " << Count(m.result.c_str());
  EXPECT_EQ(Count("answered"), m.result == "answered" ? 2 : 1);
  EXPECT_EQ(Dropped("too_large"), m.result == "too_large" ? 1 : 0);
}

INSTANTIATE_TEST_SUITE_P(
    Table, UdpEchoMtuRecordTest,
    ::testing::Values(
        MtuCase{"return_one_byte_more", MtuRequest(1000, echo::MtuMode::kReturn, 1001), 0,
                "too_large"},
        MtuCase{"return_8x", MtuRequest(1000, echo::MtuMode::kReturn, 8000), 0, "too_large"},
        MtuCase{"return_65535", MtuRequest(1000, echo::MtuMode::kReturn, 65535), 0, "too_large"},
        MtuCase{"return_below_an_ack", MtuRequest(1000, echo::MtuMode::kReturn, 23), 0,
                "too_large"},
        MtuCase{"return_less", MtuRequest(1000, echo::MtuMode::kReturn, 24), 24, "answered"},
        MtuCase{"return_reserved_flags",
                WithByte(MtuRequest(1000, echo::MtuMode::kReturn, 1000), 21, 0xFF), 1000,
                "answered"},
        MtuCase{"ack_of_its_own_size", MtuRequest(24, echo::MtuMode::kAck, 65535), 24, "answered"},
        MtuCase{"ack_over_9000_bytes", MtuRequest(9001, echo::MtuMode::kAck, 0), 0, "too_large"},
        MtuCase{"record_cut_short", Truncated(MtuRequest(1000, echo::MtuMode::kReturn, 9000), 23),
                23, "answered"},
        MtuCase{"unknown_mode", WithByte(MtuRequest(100, echo::MtuMode::kReturn, 9000), 20, 3), 100,
                "answered"}),
    [](const auto& info) { return info.param.name; });

// A reply sent back with DF (IP_PMTUDISC_DO for that send only), then the socket's own setting
// again: a 9,000-byte echo of an RTT probe after it is still answered (lo's MTU is 65,536, so
// neither is refused here; the lab test sees a refusal on a real route).
TEST_F(UdpEchoTest, ReturnRepliesLeaveTheSocketsFragmentationSettingAsItWas) {
  Start(20000, "127.0.0.1");
  Client c;
  ASSERT_TRUE(c.ok());
  Bytes back = Request(1, 6, 9000);
  ASSERT_TRUE(echo::AskMtu(back, echo::MtuMode::kReturn, 9000));
  ASSERT_TRUE(c.SendTo(back, port_));
  auto got = c.Receive();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->first.size(), 9000u);
  Bytes rtt = Request(2, 6, 9000);
  ASSERT_TRUE(c.SendTo(rtt, port_));
  got = c.Receive();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->first.size(), 9000u);
}

// A flood of MTU requests from one source (as a spoofer would aim them at a victim), half of
// them asking for 8x their bytes back: those get nothing, the rest at most their own bytes, so
// bytes out never exceed bytes in and the echo is no amplifier.
TEST_F(UdpEchoTest, AFloodOfMtuRequestsIsNoAmplifier) {
  Start(20000, "127.0.0.1", EchoLimits{}.source_share);  // the defaults
  Client c;
  ASSERT_TRUE(c.ok());
  int buffer = 4 << 20;
  setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
  std::size_t in = 0;
  for (std::uint16_t seq = 1; seq <= 2000; ++seq) {
    Bytes req = Request(seq, 9, 1125);
    bool greedy = seq % 2 == 0;
    ASSERT_TRUE(echo::AskMtu(req, seq % 4 == 1 ? echo::MtuMode::kAck : echo::MtuMode::kReturn,
                             greedy ? 9000 : 1125));
    if (c.SendTo(req, port_)) in += req.size();
    // Paced so that the kernel does not drop them before the responder (its receive buffer).
    if (seq % 20 == 0) std::this_thread::sleep_for(1ms);
  }
  c.SetTimeout(300ms);
  std::size_t out = 0, replies = 0;
  std::size_t greedy_answered = 0;
  while (auto got = c.Receive()) {
    out += got->first.size();
    ++replies;
    EXPECT_LE(got->first.size(), 1125u);
    greedy_answered += echo::DecodePayload(got->first)->seq % 2 == 0;
  }
  EXPECT_GT(replies, 0u);
  EXPECT_EQ(greedy_answered, 0u);
  EXPECT_LE(out, in / 2) << out << " B out for " << in << " B in";
  // The greedy requests were refused as too large (all of those the kernel delivered).
  EXPECT_TRUE(Eventually([&] { return Count("too_large") >= 500; })) << Count("too_large");
}

}  // namespace
}  // namespace podnet::responders
