#include "exporter/probes/rtt/rtt_probe.h"

#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "exporter/metrics/metrics.h"
#include "exporter/net/timestamping.h"
#include "exporter/responders/udp_echo.h"
#include "tests/unit/testing/loop.h"

namespace podnet::probes::rtt {
namespace {

using namespace std::chrono_literals;
using podnet::testing::CounterValue;
using podnet::testing::FindSeries;
using podnet::testing::Ipv6LoopbackWorks;
using podnet::testing::LoopThread;

const topology::Self kSelf{"probe-a", "node-1", "zone-a"};

RttOptions Options(RttProtocol protocol) {
  RttOptions o;
  o.protocol = protocol;
  o.interval = 10s;
  o.count = 5;
  o.spacing = 10ms;
  o.timeout = 200ms;
  o.size = 56;
  return o;
}

topology::Peer MakePeer(std::string name, const char* address, std::uint16_t port,
                        std::string node = "node-1", std::string zone = "zone-a") {
  topology::Peer p;
  p.name = std::move(name);
  p.address = boost::asio::ip::make_address(address);
  p.port = port;
  p.node = std::move(node);
  p.zone = std::move(zone);
  p.path = topology::Classify(kSelf, p.node, p.zone);
  return p;
}

// A UDP port on 127.0.0.1 that nothing listens on (bound, then released).
std::uint16_t FreeUdpPort() {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

bool CanOpen(int family, int type, int protocol) {
  int fd = socket(family, type, protocol);
  if (fd < 0) return false;
  close(fd);
  return true;
}

bool IcmpAvailable(bool v6) {
  int family = v6 ? int{AF_INET6} : int{AF_INET};
  int proto = v6 ? int{IPPROTO_ICMPV6} : int{IPPROTO_ICMP};
  return CanOpen(family, SOCK_DGRAM, proto) || CanOpen(family, SOCK_RAW, proto);
}

// From now on the kernel refuses setsockopt(SOL_SOCKET, SO_TIMESTAMPING) with EPERM on the
// calling thread, and on it only: a seccomp filter (Documentation/userspace-api/
// seccomp_filter.rst), which no thread can drop, so call it on a thread made for it. Each
// syscall argument is read as its low 32 bits (little-endian seccomp_data). Returns 0, or errno.
int RefuseTimestampingOnThisThread() {
  constexpr std::uint32_t kArg = offsetof(seccomp_data, args);
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setsockopt, 0, 5),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArg + 8 * 1),  // level
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOL_SOCKET, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArg + 8 * 2),  // optname
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SO_TIMESTAMPING, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) return errno;
  return 0;
}

class RttProbeTest : public ::testing::Test {
 protected:
  // The UDP echo responder runs on a loop of its own, as the responder loop does in the exporter.
  std::uint16_t StartResponder(const char* address = "127.0.0.1") {
    net::HostPort hp{boost::asio::ip::make_address(address), 0};
    responder_ = responder_loop_.Run([&] {
      return std::make_unique<responders::UdpEchoResponder>(responder_loop_.io(), hp,
                                                            responder_registry_);
    });
    return responder_->port();
  }

  void TearDown() override {
    if (responder_) responder_loop_.Run([&] { responder_.reset(); });
    responder_loop_.Stop();
  }

  // Runs one round of each probe at once on the probe loop (this thread); returns how many
  // times each `done` was called. Gives up after `limit`.
  std::vector<int> RunRounds(const std::vector<std::shared_ptr<PeerProbe>>& probes,
                             std::chrono::milliseconds limit = 3000ms) {
    std::vector<int> done(probes.size(), 0);
    auto now = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < probes.size(); ++i) {
      probes[i]->Run(now, [&done, i] { ++done[i]; });
    }
    auto deadline = now + limit;
    auto all_done = [&] {
      for (int d : done) {
        if (d == 0) return false;
      }
      return true;
    };
    io_.restart();
    while (!all_done() && std::chrono::steady_clock::now() < deadline) io_.run_one_for(50ms);
    return done;
  }

  prometheus::Labels Labels(const topology::Peer& peer, const char* protocol) {
    auto l = env_.PeerLabels(peer);
    l["protocol"] = protocol;
    return l;
  }

  double Counter(const std::string& name, const prometheus::Labels& labels) {
    return CounterValue(metrics_.registry(), name, labels);
  }

  // Byte counters carry the peer's zone and path class, not the peer (AddByteCounters).
  double BytesCounter(const std::string& name, const topology::Peer& peer) {
    auto l = metrics::PeerLabels(env_.self, peer, metrics::PeerLabelSet::kAggregated);
    l["probe"] = "rtt";
    return CounterValue(metrics_.registry(), name, l);
  }

  // The checks of a round towards a peer that answered every request.
  void ExpectAllAnswered(const topology::Peer& peer, const char* protocol, int count) {
    auto labels = Labels(peer, protocol);
    EXPECT_EQ(Counter("podnet_rtt_packets_sent_total", labels), count);
    EXPECT_EQ(Counter("podnet_rtt_packets_received_total", labels), count);
    EXPECT_EQ(Counter("podnet_rtt_duplicate_replies_total", labels), 0);
    EXPECT_EQ(Counter("podnet_rtt_reordered_replies_total", labels), 0);
    EXPECT_EQ(Counter("podnet_rtt_late_replies_total", labels), 0);
    auto h = FindSeries(metrics_.registry(), "podnet_rtt_seconds", labels);
    ASSERT_TRUE(h.has_value());
    EXPECT_EQ(h->histogram.sample_count, static_cast<std::uint64_t>(count));
    // Every RTT at most 47 ms (the le="0.047" bucket holds them all) and at least 1 µs on
    // average (the histogram cannot show single values below its first bound).
    bool found_50ms = false;
    for (const auto& b : h->histogram.bucket) {
      if (b.upper_bound == 0.047) {
        found_50ms = true;
        EXPECT_EQ(b.cumulative_count, static_cast<std::uint64_t>(count));
      }
    }
    EXPECT_TRUE(found_50ms);
    EXPECT_GE(h->histogram.sample_sum, count * 1e-6);
    EXPECT_LE(h->histogram.sample_sum, count * 0.05);
    // Bytes on the wire: IP header + ICMP/UDP header + payload, each way.
    double per_packet = (peer.address.is_v6() ? 40 : 20) + 8 + 56;
    EXPECT_EQ(BytesCounter("podnet_probe_sent_bytes_total", peer), count * per_packet);
    EXPECT_EQ(BytesCounter("podnet_probe_received_bytes_total", peer), count * per_packet);
    // Each measured RTT was timed from one TX and one RX stamp, kernel or user space.
    auto stamps = [&](const char* direction) {
      return Counter("podnet_rtt_timestamps_total",
                     {{"direction", direction}, {"source", "kernel"}}) +
             Counter("podnet_rtt_timestamps_total", {{"direction", direction}, {"source", "user"}});
    };
    EXPECT_EQ(stamps("tx"), count);
    EXPECT_EQ(stamps("rx"), count);
  }

  static bool KernelTxStamps() {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    bool on = net::EnableTimestamping(fd).tx_kernel;
    close(fd);
    return on;
  }

  bool SeriesOf(const std::string& peer_name) {
    return metrics_.Serialize().find("peer=\"" + peer_name + "\"") != std::string::npos;
  }

  prometheus::Registry responder_registry_;
  LoopThread responder_loop_;
  std::unique_ptr<responders::UdpEchoResponder> responder_;

  boost::asio::io_context io_;  // the probe loop
  metrics::Metrics metrics_;
  ProbeEnv env_{io_, metrics_, kSelf};
};

TEST_F(RttProbeTest, UdpEchoAllAnswered) {
  std::uint16_t port = StartResponder();
  auto kind = MakeRttKind(Options(RttProtocol::kUdp), env_);
  EXPECT_EQ(kind->name(), "rtt");
  EXPECT_EQ(kind->interval(), 10s);
  auto peer = MakePeer("udp-peer", "127.0.0.1", port);
  auto probe = kind->ForPeer(peer);
  // Side by side, a peer where nothing listens: its round lasts (count-1)*spacing + timeout. In
  // another zone: byte counters are per zone and path class, and the answered peer's are checked.
  auto silent =
      kind->ForPeer(MakePeer("silent-peer", "127.0.0.1", FreeUdpPort(), "node-2", "zone-b"));
  auto start = std::chrono::steady_clock::now();
  std::vector<std::chrono::steady_clock::time_point> ended(2);
  probe->Run(start, [&] { ended[0] = std::chrono::steady_clock::now(); });
  silent->Run(start, [&] { ended[1] = std::chrono::steady_clock::now(); });
  io_.restart();
  for (int i = 0; i < 100 && ended[1] == std::chrono::steady_clock::time_point{}; ++i) {
    io_.run_one_for(50ms);
  }
  ASSERT_NE(ended[0], std::chrono::steady_clock::time_point{});
  ASSERT_NE(ended[1], std::chrono::steady_clock::time_point{});
  // The last send is due (count-1)*spacing = 40 ms in; a train whose every request is answered
  // ends at its last reply, before the timeout that ends the silent one.
  EXPECT_GE(ended[0] - start, 40ms);
  EXPECT_GE(ended[1] - start, 240ms);
  EXPECT_LT(ended[0], ended[1]);
  ExpectAllAnswered(peer, "udp", 5);
  EXPECT_EQ(responder_registry_.Collect().empty(), false);
  EXPECT_EQ(CounterValue(responder_registry_, "podnet_responder_requests_total",
                         {{"result", "answered"}}),
            5);
  // Every series carries the peer labels (docs/design.md, "Metrics: peer labels and buckets").
  auto h = FindSeries(metrics_.registry(), "podnet_rtt_seconds", Labels(peer, "udp"));
  ASSERT_TRUE(h.has_value());
  std::map<std::string, std::string> labels;
  for (const auto& l : h->label) labels[l.name] = l.value;
  EXPECT_EQ(labels, (std::map<std::string, std::string>{{"source_node", "node-1"},
                                                        {"source_zone", "zone-a"},
                                                        {"peer", "udp-peer"},
                                                        {"peer_node", "node-1"},
                                                        {"peer_zone", "zone-a"},
                                                        {"path_class", "same_node"},
                                                        {"protocol", "udp"}}));
}

TEST_F(RttProbeTest, UdpSecondRoundAddsUp) {
  std::uint16_t port = StartResponder();
  auto kind = MakeRttKind(Options(RttProtocol::kUdp), env_);
  auto peer = MakePeer("udp-peer", "127.0.0.1", port);
  auto probe = kind->ForPeer(peer);
  ASSERT_EQ(RunRounds({probe}), std::vector<int>{1});
  ASSERT_EQ(RunRounds({probe}), std::vector<int>{1});
  ExpectAllAnswered(peer, "udp", 10);
  // Where the kernel gives software TX stamps, every RTT is timed from one: the stamps are read
  // (in one batch after the sends) before any reply closes its train.
  if (KernelTxStamps()) {
    EXPECT_EQ(Counter("podnet_rtt_timestamps_total", {{"direction", "tx"}, {"source", "kernel"}}),
              10);
  }
}

TEST_F(RttProbeTest, UdpNothingListening) {
  auto kind = MakeRttKind(Options(RttProtocol::kUdp), env_);
  auto peer = MakePeer("dead-peer", "127.0.0.1", FreeUdpPort(), "node-2", "zone-b");
  auto probe = kind->ForPeer(peer);
  ASSERT_EQ(RunRounds({probe}), std::vector<int>{1});
  auto labels = Labels(peer, "udp");
  EXPECT_EQ(Counter("podnet_rtt_packets_sent_total", labels), 5);
  EXPECT_EQ(Counter("podnet_rtt_packets_received_total", labels), 0);
  auto h = FindSeries(metrics_.registry(), "podnet_rtt_seconds", labels);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->histogram.sample_count, 0u);
  EXPECT_EQ(BytesCounter("podnet_probe_received_bytes_total", peer), 0);
  EXPECT_EQ(env_.PeerLabels(peer).at("path_class"), "cross_zone");
}

// The round gauges: absent until a round has an RTT, the exact min and median of that round's
// samples, and removed (not left standing) after a round in which nothing answered.
TEST_F(RttProbeTest, RoundGaugesFollowTheLastRound) {
  std::uint16_t port = StartResponder();
  auto kind = MakeRttKind(Options(RttProtocol::kUdp), env_);
  auto peer = MakePeer("udp-peer", "127.0.0.1", port);
  auto labels = Labels(peer, "udp");
  auto gauge = [&](const char* name) {
    auto m = FindSeries(metrics_.registry(), name, labels);
    return m ? std::optional<double>(m->gauge.value) : std::nullopt;
  };
  auto probe = kind->ForPeer(peer);
  EXPECT_FALSE(gauge("podnet_rtt_round_min_seconds").has_value()) << "no round yet: no value";
  ASSERT_EQ(RunRounds({probe}), std::vector<int>{1});
  auto min = gauge("podnet_rtt_round_min_seconds");
  auto median = gauge("podnet_rtt_round_median_seconds");
  ASSERT_TRUE(min.has_value());
  ASSERT_TRUE(median.has_value());
  auto h = FindSeries(metrics_.registry(), "podnet_rtt_seconds", labels);
  ASSERT_TRUE(h.has_value());
  // Of the same 5 samples the histogram took: min <= median, 5 x min <= sum <= 5 x 50 ms.
  EXPECT_GT(*min, 0);
  EXPECT_LE(*min, *median);
  EXPECT_LE(5 * *min, h->histogram.sample_sum * (1 + 1e-12));
  EXPECT_LE(*median, 0.05);

  // The responder goes: the next round has no reply, and the gauges go with it.
  responder_loop_.Run([&] { responder_.reset(); });
  ASSERT_EQ(RunRounds({probe}), std::vector<int>{1});
  EXPECT_EQ(Counter("podnet_rtt_packets_received_total", labels), 5);  // the first round's
  EXPECT_FALSE(gauge("podnet_rtt_round_min_seconds").has_value());
  EXPECT_FALSE(gauge("podnet_rtt_round_median_seconds").has_value());
  EXPECT_TRUE(SeriesOf("udp-peer"));  // the peer's other series stay

  // It answers again (a responder on the same port): the gauges come back.
  net::HostPort hp{boost::asio::ip::make_address("127.0.0.1"), port};
  responder_ = responder_loop_.Run([&] {
    return std::make_unique<responders::UdpEchoResponder>(responder_loop_.io(), hp,
                                                          responder_registry_);
  });
  ASSERT_EQ(RunRounds({probe}), std::vector<int>{1});
  EXPECT_TRUE(gauge("podnet_rtt_round_min_seconds").has_value());
  EXPECT_TRUE(gauge("podnet_rtt_round_median_seconds").has_value());
  probe->RemoveSeries();
  EXPECT_FALSE(gauge("podnet_rtt_round_median_seconds").has_value());
}

TEST_F(RttProbeTest, RepliesGoToTheirOwnPeer) {
  // Two peers share the kind's socket: one answers, one does not.
  std::uint16_t port = StartResponder();
  auto kind = MakeRttKind(Options(RttProtocol::kUdp), env_);
  auto live = MakePeer("live", "127.0.0.1", port);
  auto dead = MakePeer("dead", "127.0.0.1", FreeUdpPort());
  auto done = RunRounds({kind->ForPeer(live), kind->ForPeer(dead)});
  ASSERT_EQ(done, (std::vector<int>{1, 1}));
  EXPECT_EQ(Counter("podnet_rtt_packets_received_total", Labels(live, "udp")), 5);
  EXPECT_EQ(Counter("podnet_rtt_packets_received_total", Labels(dead, "udp")), 0);
  EXPECT_EQ(Counter("podnet_rtt_packets_sent_total", Labels(dead, "udp")), 5);
}

// After a failed send, the kernel's TX-stamp keys are restarted (OPT_ID off and on). When the
// kernel refuses, they are unknown: the socket gives up kernel TX stamps, the failure is counted
// once, and RTTs go on being measured, timed from user-space TX stamps.
TEST_F(RttProbeTest, TxStampKeysTheKernelWillNotRestartAreGivenUpAndCounted) {
  std::uint16_t port = StartResponder();
  auto kind = MakeRttKind(Options(RttProtocol::kUdp), env_);
  auto live = MakePeer("live", "127.0.0.1", port);
  auto refused = MakePeer("port-zero", "127.0.0.1", 0);  // sendto: EINVAL, every time
  auto live_probe = kind->ForPeer(live);
  auto refused_probe = kind->ForPeer(refused);
  auto tx = [&](const char* source) {
    return Counter("podnet_rtt_timestamps_total", {{"direction", "tx"}, {"source", source}});
  };
  auto errors = [&](const char* reason) {
    auto labels = env_.PeerLabels(refused);
    labels["probe"] = "rtt";
    labels["reason"] = reason;
    return CounterValue(metrics_.registry(), "podnet_probe_errors_total", labels);
  };
  ASSERT_EQ(RunRounds({live_probe}), std::vector<int>{1});  // opens the socket, stamps armed
  if (tx("kernel") != 5) GTEST_SKIP() << "no kernel TX stamps here: nothing to re-arm";
  // The probe loop moves to a thread of its own whose SO_TIMESTAMPING calls the kernel refuses.
  int filter_error = 0;
  std::vector<int> refused_rounds, live_rounds;
  std::thread loop([&] {
    filter_error = RefuseTimestampingOnThisThread();
    if (filter_error != 0) return;
    refused_rounds = RunRounds({refused_probe});
    live_rounds = RunRounds({live_probe});
  });
  loop.join();
  ASSERT_EQ(filter_error, 0) << "seccomp filter: " << std::strerror(filter_error);
  ASSERT_EQ(refused_rounds, std::vector<int>{1});
  ASSERT_EQ(live_rounds, std::vector<int>{1});
  EXPECT_EQ(errors("send_failed"), 5);
  EXPECT_EQ(errors("tx_timestamping"), 1) << "the lost TX stamps were not counted (once)";
  ExpectAllAnswered(live, "udp", 10);
  EXPECT_EQ(tx("kernel"), 5);
  EXPECT_EQ(tx("user"), 5);
}

TEST_F(RttProbeTest, RemoveSeriesRemovesOnlyThatPeer) {
  std::uint16_t port = StartResponder();
  auto kind = MakeRttKind(Options(RttProtocol::kUdp), env_);
  auto gone = MakePeer("gone-peer", "127.0.0.1", port);
  auto stays = MakePeer("staying-peer", "127.0.0.1", FreeUdpPort());
  auto gone_probe = kind->ForPeer(gone);
  auto stays_probe = kind->ForPeer(stays);
  ASSERT_EQ(RunRounds({gone_probe, stays_probe}), (std::vector<int>{1, 1}));
  ASSERT_TRUE(SeriesOf("gone-peer"));
  ASSERT_TRUE(SeriesOf("staying-peer"));
  gone_probe->RemoveSeries();
  std::string text = metrics_.Serialize();
  EXPECT_EQ(text.find("peer=\"gone-peer\""), std::string::npos) << text;
  EXPECT_TRUE(SeriesOf("staying-peer"));
  // After RemoveSeries the probe touches no metric again, even if it runs.
  ASSERT_EQ(RunRounds({gone_probe}), std::vector<int>{1});
  EXPECT_FALSE(SeriesOf("gone-peer"));
}

TEST_F(RttProbeTest, AggregatedPeersShareOneSeriesUntilTheLastGoes) {
  // metrics.aggregate_peers: two peers of one zone (different names and nodes) feed one
  // series per metric; it outlives the first peer's removal and goes with the second's.
  env_.peer_labels = metrics::PeerLabelSet::kAggregated;
  std::uint16_t port = StartResponder();
  auto kind = MakeRttKind(Options(RttProtocol::kUdp), env_);
  auto a = MakePeer("peer-a", "127.0.0.1", port, "node-2", "zone-b");
  auto b = MakePeer("peer-b", "127.0.0.1", port, "node-3", "zone-b");
  auto probe_a = kind->ForPeer(a);
  auto probe_b = kind->ForPeer(b);
  ASSERT_EQ(RunRounds({probe_a, probe_b}), (std::vector<int>{1, 1}));
  const prometheus::Labels shared{{"source_node", "node-1"},
                                  {"source_zone", "zone-a"},
                                  {"peer_zone", "zone-b"},
                                  {"path_class", "cross_zone"},
                                  {"protocol", "udp"}};
  EXPECT_EQ(Labels(a, "udp"), shared);
  EXPECT_EQ(Labels(b, "udp"), shared);
  auto series_count = [&](const std::string& name) {
    int n = 0;
    for (const auto& f : metrics_.registry().Collect()) {
      if (f.name == name) n += static_cast<int>(f.metric.size());
    }
    return n;
  };
  EXPECT_EQ(series_count("podnet_rtt_seconds"), 1);
  EXPECT_EQ(series_count("podnet_rtt_packets_sent_total"), 1);
  EXPECT_EQ(Counter("podnet_rtt_packets_sent_total", shared), 10);  // 5 + 5
  auto h = FindSeries(metrics_.registry(), "podnet_rtt_seconds", shared);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->histogram.sample_count, 10u);
  EXPECT_EQ(metrics_.Serialize().find("peer=\""), std::string::npos);

  probe_a->RemoveSeries();  // peer-b still feeds every series: all stay, counts kept
  EXPECT_EQ(series_count("podnet_rtt_seconds"), 1);
  EXPECT_EQ(Counter("podnet_rtt_packets_sent_total", shared), 10);
  EXPECT_EQ(BytesCounter("podnet_probe_sent_bytes_total", b), 10 * (20 + 8 + 56));
  ASSERT_EQ(RunRounds({probe_b}), std::vector<int>{1});
  EXPECT_EQ(Counter("podnet_rtt_packets_sent_total", shared), 15);

  probe_b->RemoveSeries();  // the last user: every shared series goes
  EXPECT_EQ(series_count("podnet_rtt_seconds"), 0);
  EXPECT_EQ(series_count("podnet_rtt_packets_sent_total"), 0);
  EXPECT_EQ(BytesCounter("podnet_probe_sent_bytes_total", b), -1);
}

struct IcmpCase {
  std::string name;
  const char* address;
};

void PrintTo(const IcmpCase& c, std::ostream* os) { *os << c.name; }

class RttIcmpTest : public RttProbeTest, public ::testing::WithParamInterface<IcmpCase> {};

TEST_P(RttIcmpTest, LoopbackAllAnswered) {
  const auto& c = GetParam();
  bool v6 = boost::asio::ip::make_address(c.address).is_v6();
  // Root (raw socket) or a group in net.ipv4.ping_group_range (datagram "ping" socket).
  if (!IcmpAvailable(v6)) GTEST_SKIP() << "no ICMP socket can be opened: run as root";
  if (v6 && !Ipv6LoopbackWorks()) GTEST_SKIP() << "no IPv6 loopback here";
  auto kind = MakeRttKind(Options(RttProtocol::kIcmp), env_);
  auto peer = MakePeer("icmp-peer", c.address, 9479);
  auto probe = kind->ForPeer(peer);
  ASSERT_EQ(RunRounds({probe}), std::vector<int>{1});
  ExpectAllAnswered(peer, "icmp", 5);
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_probe_errors_total", {{"peer", "icmp-peer"}}),
            -1)
      << "no error series expected";
}

INSTANTIATE_TEST_SUITE_P(Table, RttIcmpTest,
                         ::testing::Values(IcmpCase{"ipv4", "127.0.0.1"}, IcmpCase{"ipv6", "::1"}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace podnet::probes::rtt
