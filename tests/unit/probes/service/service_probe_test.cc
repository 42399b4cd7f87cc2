#include "exporter/probes/service/service_probe.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "exporter/metrics/metrics.h"
#include "exporter/responders/http_server.h"
#include "exporter/responders/udp_echo.h"
#include "exporter/wire/echo.h"
#include "tests/unit/testing/loop.h"

namespace podnet::probes::service {
namespace {

using namespace std::chrono_literals;
using podnet::testing::CounterValue;
using podnet::testing::FindSeries;
using podnet::testing::LoopThread;
using topology::PathClass;

const topology::Self kSelf{"probe-a", "node-1", "zone-a"};

TEST(AttributeTest, PathClassOfThisPodToTheBackendThatAnswered) {
  struct Case {
    bool identified;
    const char* node;
    const char* zone;
    Attribution want;
  };
  for (const Case& c : {
           Case{true, "node-1", "zone-a", {"zone-a", PathClass::kSameNode}},
           Case{true, "node-2", "zone-a", {"zone-a", PathClass::kSameZone}},
           Case{true, "node-3", "zone-b", {"zone-b", PathClass::kCrossZone}},
           // topology::Classify: an empty zone on a different node cannot be placed.
           Case{true, "node-3", "", {"", PathClass::kUnknown}},
           // No identity in the answer (an old responder): unknown, no zone, whatever was read.
           Case{false, "node-1", "zone-a", {"", PathClass::kUnknown}},
       }) {
    EXPECT_EQ(Attribute(kSelf, c.identified, c.node, c.zone), c.want)
        << c.identified << " " << c.node << " " << c.zone;
  }
  // This Pod without a zone: only the same node is known.
  topology::Self no_zone{"probe-a", "node-1", ""};
  EXPECT_EQ(Attribute(no_zone, true, "node-1", "zone-a").path, PathClass::kSameNode);
  EXPECT_EQ(Attribute(no_zone, true, "node-2", "zone-a").path, PathClass::kUnknown);
}

class ServiceProbeTest : public ::testing::Test {
 protected:
  // One round of one target on the probe loop (this thread); true when `done` came once in time.
  bool RunRound(ServiceTarget target, int count = 6) {
    ServiceOptions o;
    o.count = count;
    o.spacing = 2ms;
    o.timeout = 500ms;
    o.targets = {target};
    MakeProbe(o);
    return RunProbeRound();
  }
  // A new kind with options `o` and the probe of its one target.
  void MakeProbe(const ServiceOptions& o) {
    env_ = std::make_unique<ProbeEnv>(ProbeEnv{io_, metrics_, kSelf});
    kind_ = MakeServiceKind(o, *env_);
    EXPECT_EQ(kind_->Targets(), std::vector<std::string>{o.targets.at(0).name});
    probe_ = kind_->ForTarget(o.targets.at(0).name);
  }
  // One more round of the probe MakeProbe made (its state lives as long as it does).
  bool RunProbeRound(std::chrono::milliseconds timeout = 5s) {
    int done = 0;
    probe_->Run(std::chrono::steady_clock::now(), [&] { ++done; });
    auto deadline = std::chrono::steady_clock::now() + timeout;
    io_.restart();
    while (done == 0 && std::chrono::steady_clock::now() < deadline) io_.run_one_for(50ms);
    return done == 1;
  }

  prometheus::Labels Labels(const std::string& service, prometheus::Labels extra) {
    extra.insert({{"service", service}, {"source_node", "node-1"}, {"source_zone", "zone-a"}});
    return extra;
  }
  double Requests(const std::string& service, const std::string& zone, const std::string& path) {
    return CounterValue(metrics_.registry(), "podnet_service_requests_total",
                        Labels(service, {{"backend_zone", zone}, {"path_class", path}}));
  }
  double Errors(const std::string& service, const std::string& reason) {
    return CounterValue(metrics_.registry(), "podnet_service_request_errors_total",
                        Labels(service, {{"reason", reason}}));
  }
  std::uint64_t RttCount(const std::string& service, const std::string& path) {
    auto m = FindSeries(metrics_.registry(), "podnet_service_rtt_seconds",
                        Labels(service, {{"path_class", path}}));
    return m ? m->histogram.sample_count : 0;
  }

  boost::asio::io_context io_;
  metrics::Metrics metrics_;
  std::unique_ptr<ProbeEnv> env_;
  std::shared_ptr<ProbeKind> kind_;
  std::shared_ptr<PeerProbe> probe_;
};

class UdpServiceTest : public ServiceProbeTest {
 protected:
  void SetUp() override {
    responder_ = loop_.Run([&] {
      return std::make_unique<responders::UdpEchoResponder>(
          loop_.io(), net::HostPort{boost::asio::ip::make_address("127.0.0.1"), 0}, registry_);
    });
  }
  void TearDown() override {
    loop_.Run([&] { responder_.reset(); });
    loop_.Stop();
  }
  ServiceTarget Target() { return {"svc-udp", "127.0.0.1", responder_->port(), {}, "", ""}; }

  prometheus::Registry registry_;
  LoopThread loop_;
  std::unique_ptr<responders::UdpEchoResponder> responder_;
};

TEST_F(UdpServiceTest, AnswersAreAttributedToTheBackendThatIdentifiedItself) {
  loop_.Run([&] {
    responder_->SetIdentity("node-2", "zone-a");
    return 0;
  });
  ASSERT_TRUE(RunRound(Target()));
  EXPECT_EQ(Requests("svc-udp", "zone-a", "same_zone"), 6);
  EXPECT_EQ(RttCount("svc-udp", "same_zone"), 6u);
  // 6 requests and 6 replies of 384 bytes, each with 28 bytes of IPv4 and UDP headers.
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_probe_sent_bytes_total",
                         Labels("svc-udp", {{"probe", "service"}})),
            6 * (384 + 28));
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_probe_received_bytes_total",
                         Labels("svc-udp", {{"probe", "service"}})),
            6 * (384 + 28));
  EXPECT_EQ(Requests("svc-udp", "", "unknown"), -1);
  // The backend moves to another zone: the next round says cross_zone.
  loop_.Run([&] {
    responder_->SetIdentity("node-3", "zone-b");
    return 0;
  });
  ASSERT_TRUE(RunRound(Target()));
  EXPECT_EQ(Requests("svc-udp", "zone-b", "cross_zone"), 6);
  // A target that leaves takes its series with it.
  probe_->RemoveSeries();
  EXPECT_EQ(Requests("svc-udp", "zone-b", "cross_zone"), -1);
}

TEST_F(UdpServiceTest, ResponderThatDoesNotIdentifyItselfIsUnknown) {
  ASSERT_TRUE(RunRound(Target()));
  EXPECT_EQ(Requests("svc-udp", "", "unknown"), 6);
  EXPECT_EQ(RttCount("svc-udp", "unknown"), 6u);
}

// A plain UDP echo server on a thread of its own: answers `count` requests, the i-th with the
// identity `identity(i)`, and records each request's source port.
class ThreadEchoServer {
 public:
  ThreadEchoServer(int count, std::function<wire::echo::Identity(int)> identity)
      : socket_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this, count, identity = std::move(identity)] {
      std::vector<std::uint8_t> buf(2048);
      for (int i = 0; i < count; ++i) {
        boost::asio::ip::udp::endpoint from;
        boost::system::error_code ec;
        std::size_t n = socket_.receive_from(boost::asio::buffer(buf), from, 0, ec);
        if (ec) return;  // closed: the test is over
        std::span<std::uint8_t> data(buf.data(), n);
        wire::echo::Identity self = identity(i);
        if (!wire::echo::MakeReply(data, &self)) continue;
        ports_.push_back(from.port());
        socket_.send_to(boost::asio::buffer(data.data(), n), from, 0, ec);
      }
    });
  }
  // Stops the thread; the ports it recorded.
  std::vector<std::uint16_t> Stop() {
    boost::system::error_code ec;
    socket_.shutdown(boost::asio::socket_base::shutdown_both, ec);
    socket_.close(ec);
    if (thread_.joinable()) thread_.join();
    return ports_;
  }
  ~ThreadEchoServer() { Stop(); }
  std::uint16_t port() const { return socket_.local_endpoint().port(); }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::udp::socket socket_;
  std::vector<std::uint16_t> ports_;
  std::thread thread_;
};

// Each request is a flow of its own: a Service's conntrack entry would pin requests that share
// a source port to one backend.
TEST_F(ServiceProbeTest, EveryUdpRequestComesFromANewSourcePort) {
  constexpr int kCount = 20;
  ThreadEchoServer server(kCount, [](int) { return wire::echo::Identity{"node-2", "zone-a", ""}; });
  bool done =
      RunRound({"svc-ports", "127.0.0.1", server.port(), ServiceProtocol::kUdp, "", ""}, kCount);
  std::vector<std::uint16_t> ports = server.Stop();
  ASSERT_TRUE(done);
  EXPECT_EQ(Requests("svc-ports", "zone-a", "same_zone"), kCount);
  ASSERT_EQ(ports.size(), std::size_t{kCount});
  // A request's socket is closed when it is answered, so the kernel may hand its port out
  // again (Linux picks UDP ephemeral ports at random: one repeat among 20 draws from ~28,000
  // ports happens in ~0.7 % of runs, two in ~0.002 %). One socket for all would give 1.
  EXPECT_GE(std::set<std::uint16_t>(ports.begin(), ports.end()).size(), std::size_t{kCount - 1})
      << "requests shared a source port";
}

// A responder that names a new zone in every answer does not grow the series without bound.
TEST_F(ServiceProbeTest, BackendZonesPerTargetAreBounded) {
  constexpr int kCount = 40;
  ThreadEchoServer server(kCount, [](int i) {
    return wire::echo::Identity{"node-9", "zone-" + std::to_string(i), ""};
  });
  bool done =
      RunRound({"svc-zones", "127.0.0.1", server.port(), ServiceProtocol::kUdp, "", ""}, kCount);
  server.Stop();
  ASSERT_TRUE(done);
  int series = 0;
  for (int i = 0; i < kCount; ++i) {
    series += Requests("svc-zones", "zone-" + std::to_string(i), "cross_zone") == 1;
  }
  EXPECT_EQ(series, 32);
  EXPECT_EQ(Errors("svc-zones", "too_many_zones"), kCount - 32);
}

// Issue 21: the cap was sticky. A hostile burst fills the 32 slots with made-up zones; they go
// quiet; after 30 answered rounds without an answer from them, their slots and series are
// freed (counted), and a real new zone gets a slot.
TEST_F(ServiceProbeTest, QuietZoneSlotsAreFreedSoARealNewZoneGetsOne) {
  constexpr int kCount = 33;  // requests a round: 32 slots and one more
  constexpr int kRounds = 32;
  // The first round's answers name 33 made-up zones, every later one "zone-real".
  ThreadEchoServer server(kCount * kRounds, [](int i) {
    return wire::echo::Identity{"node-9", i < kCount ? "made-up-" + std::to_string(i) : "zone-real",
                                ""};
  });
  ServiceTarget target{"svc-sticky", "127.0.0.1", server.port(), ServiceProtocol::kUdp, "", ""};
  ServiceOptions o;
  o.count = kCount;
  o.spacing = 0ms;
  o.timeout = 1s;
  o.targets = {target};
  MakeProbe(o);  // one probe for every round: its slots live as long as it does
  auto round = [&] { return RunProbeRound(10s); };
  auto made_up = [&] {
    int n = 0;
    for (int i = 0; i < kCount; ++i) {
      n += Requests("svc-sticky", "made-up-" + std::to_string(i), "cross_zone") == 1;
    }
    return n;
  };
  ASSERT_TRUE(round());
  EXPECT_EQ(made_up(), 32);
  EXPECT_EQ(Errors("svc-sticky", "too_many_zones"), 1);
  // 30 rounds in which only the real zone answers: the slots are still held (29 quiet rounds
  // when the 31st starts), every answer too_many_zones.
  for (int r = 2; r <= kRounds - 1; ++r) ASSERT_TRUE(round()) << "round " << r;
  EXPECT_EQ(made_up(), 32);
  EXPECT_EQ(Requests("svc-sticky", "zone-real", "cross_zone"), -1);
  EXPECT_EQ(Errors("svc-sticky", "too_many_zones"), 1 + 30 * kCount);
  // The 32nd round starts 30 answered rounds after the made-up zones last answered: freed.
  ASSERT_TRUE(round());
  server.Stop();
  EXPECT_EQ(made_up(), 0);
  EXPECT_EQ(Requests("svc-sticky", "zone-real", "cross_zone"), kCount);
  EXPECT_EQ(Errors("svc-sticky", "too_many_zones"), 1 + 30 * kCount);
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_service_backend_zones_expired_total",
                         Labels("svc-sticky", {})),
            32);
}

// What a responder answers over HTTP is bounded and checked before it becomes a label: a 1 MB
// identity field, a NUL, a terminal escape or bytes that are not UTF-8 are errors, never series.
class RawHttpServer {
 public:
  // Answers `responses.size()` connections in order, each with its canned response, and closes.
  explicit RawHttpServer(std::vector<std::string> responses)
      : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this, responses = std::move(responses)] {
      for (const std::string& response : responses) {
        boost::asio::ip::tcp::socket s(io_);
        boost::system::error_code ec;
        acceptor_.accept(s, ec);
        if (ec) return;
        std::string request;
        char buf[4096];
        while (request.find("\r\n\r\n") == std::string::npos) {
          std::size_t n = s.read_some(boost::asio::buffer(buf), ec);
          if (ec) break;
          request.append(buf, n);
        }
        boost::asio::write(s, boost::asio::buffer(response), ec);
        s.shutdown(boost::asio::socket_base::shutdown_both, ec);
      }
    });
  }
  ~RawHttpServer() {
    boost::system::error_code ec;
    acceptor_.close(ec);
    if (thread_.joinable()) thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
};

TEST_F(ServiceProbeTest, HostileHttpIdentitiesAreErrorsNotSeries) {
  auto answer = [](const std::string& node, const std::string& zone) {
    return "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\nPodnet-Node: " + node +
           "\r\nPodnet-Zone: " + zone + "\r\n\r\necho";
  };
  std::vector<std::string> hostile = {
      answer("node-1", std::string(1 << 20, 'z')),  // 1 MB: past the 8 KiB header limit
      answer("node-1", std::string(300, 'z')),      // longer than any name
      answer(std::string("node\0x", 6), "zone-a"),  // NUL
      answer("node-1", "zone\x1b[31m"),             // ESC [
      answer("node-1", "zone\xff\xfe"),             // not UTF-8
      answer("node\xc2\x9b"
             "1",
             "zone-a"),  // C1 CSI
  };
  RawHttpServer server(hostile);
  int n = static_cast<int>(hostile.size());
  ASSERT_TRUE(
      RunRound({"svc-evil", "127.0.0.1", server.port(), ServiceProtocol::kHttp, "", ""}, n));
  // No answer became a series; each one counted as an error.
  for (const auto& f : metrics_.registry().Collect()) {
    if (f.name != "podnet_service_requests_total") continue;
    for (const auto& m : f.metric) {
      EXPECT_FALSE(podnet::testing::HasLabels(m, {{"service", "svc-evil"}}))
          << podnet::testing::LabelsText(m.label).substr(0, 200);
    }
  }
  double errors = 0;
  for (const auto& f : metrics_.registry().Collect()) {
    if (f.name != "podnet_service_request_errors_total") continue;
    for (const auto& m : f.metric) {
      if (podnet::testing::HasLabels(m, {{"service", "svc-evil"}})) errors += m.counter.value;
    }
  }
  EXPECT_EQ(errors, n);
  EXPECT_GE(Errors("svc-evil", "bad_response"), 2);  // the long name, the bytes not UTF-8
}

TEST_F(ServiceProbeTest, NothingListeningIsRefusedAndAnUnresolvableNameIsOneResolveError) {
  std::uint16_t closed;
  {
    // A port that was just free: bound, then closed.
    boost::asio::ip::udp::socket s(io_, {boost::asio::ip::make_address("127.0.0.1"), 0});
    closed = s.local_endpoint().port();
  }
  ASSERT_TRUE(RunRound({"svc-closed", "127.0.0.1", closed, ServiceProtocol::kUdp, "", ""}, 3));
  EXPECT_EQ(Errors("svc-closed", "refused"), 3);
  // RFC 6761: .invalid never resolves. One error for the round, nothing sent.
  ASSERT_TRUE(RunRound({"svc-name", "podnet-test.invalid", 9, ServiceProtocol::kUdp, "", ""}, 3));
  EXPECT_EQ(Errors("svc-name", "resolve"), 1);
  EXPECT_EQ(Errors("svc-name", "timeout"), -1);
}

TEST_F(ServiceProbeTest, HttpAnswersCarryTheIdentityHeaders) {
  LoopThread server_loop;
  std::string node = "node-1";
  auto server = server_loop.Run([&] {
    return std::make_unique<responders::HttpServer>(
        server_loop.io(), net::HostPort{boost::asio::ip::make_address("127.0.0.1"), 0},
        [&](const responders::HttpRequest&) {
          responders::HttpResponse r{200, "text/plain", "echo"};
          if (!node.empty()) r.headers = {{"Podnet-Node", node}, {"Podnet-Zone", "zone-a"}};
          return r;
        });
  });
  std::uint16_t port = server->port();
  ASSERT_TRUE(RunRound({"svc-http", "127.0.0.1", port, ServiceProtocol::kHttp, "", ""}, 4));
  EXPECT_EQ(Requests("svc-http", "zone-a", "same_node"), 4);
  EXPECT_EQ(RttCount("svc-http", "same_node"), 4u);
  // A node name no label should carry: bad_response, not a series.
  server_loop.Run([&] {
    node = "node\"1";
    return 0;
  });
  ASSERT_TRUE(RunRound({"svc-http", "127.0.0.1", port, ServiceProtocol::kHttp, "", ""}, 2));
  EXPECT_EQ(Errors("svc-http", "bad_response"), 2);
  // Without the headers: unknown.
  server_loop.Run([&] {
    node.clear();
    return 0;
  });
  ASSERT_TRUE(RunRound({"svc-http", "127.0.0.1", port, ServiceProtocol::kHttp, "", ""}, 2));
  EXPECT_EQ(Requests("svc-http", "", "unknown"), 2);
  server_loop.Run([&] { server.reset(); });
}

}  // namespace
}  // namespace podnet::probes::service
