#include "exporter/probes/grpc/grpc_probe.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <vector>

#include "exporter/metrics/metrics.h"
#include "exporter/responders/grpc_health.h"
#include "tests/unit/testing/loop.h"

namespace podnet::probes::grpc {
namespace {

using namespace std::chrono_literals;
using podnet::testing::CounterValue;
using podnet::testing::FindSeries;

const config::Self kSelf{"probe-a", "node-1", "zone-a"};

TEST(GrpcHealthDecodeTest, ReadsTheServingStatus) {
  EXPECT_EQ(DecodeHealthStatus(std::vector<std::uint8_t>{}), 0);            // UNKNOWN (default)
  EXPECT_EQ(DecodeHealthStatus(std::vector<std::uint8_t>{0x08, 0x01}), 1);  // SERVING
  EXPECT_EQ(DecodeHealthStatus(std::vector<std::uint8_t>{0x08, 0x02}), 2);  // NOT_SERVING
  EXPECT_EQ(DecodeHealthStatus(std::vector<std::uint8_t>{0x10, 0x05, 0x08, 0x01}), 1);
  EXPECT_FALSE(DecodeHealthStatus(std::vector<std::uint8_t>{0x0a, 0x01, 0x41}));  // bytes field
  EXPECT_FALSE(DecodeHealthStatus(std::vector<std::uint8_t>{0x08, 0x81}));        // cut varint
  EXPECT_STREQ(StatusCodeName(4), "DEADLINE_EXCEEDED");
  EXPECT_STREQ(StatusCodeName(14), "UNAVAILABLE");
}

class GrpcProbeTest : public ::testing::Test {
 protected:
  bool RunRound(const GrpcOptions& o, const char* address, std::chrono::milliseconds limit = 5s) {
    topology::Peer p;
    p.name = "peer";
    p.address = boost::asio::ip::make_address(address);
    p.node = "node-1";
    p.zone = "zone-a";
    p.path = topology::Classify(kSelf, p.node, p.zone);
    labels_ = metrics::PeerLabels(kSelf, p, metrics::PeerLabelSet::kPerPeer);
    env_ = std::make_unique<ProbeEnv>(ProbeEnv{io_, metrics_, kSelf});
    kind_ = MakeGrpcKind(o, *env_);
    probe_ = kind_->ForPeer(p);
    int done = 0;
    probe_->Run(std::chrono::steady_clock::now(), [&] { ++done; });
    auto deadline = std::chrono::steady_clock::now() + limit;
    io_.restart();
    // gRPC's threads post outcomes to the loop: keep it running while none is queued.
    auto work = boost::asio::make_work_guard(io_);
    while (done == 0 && std::chrono::steady_clock::now() < deadline) io_.run_one_for(50ms);
    return done == 1;
  }
  double Requests(const char* code) {
    auto l = labels_;
    l["code"] = code;
    return CounterValue(metrics_.registry(), "podnet_grpc_requests_total", l);
  }

  boost::asio::io_context io_;
  metrics::Metrics metrics_;
  prometheus::Labels labels_;
  std::unique_ptr<ProbeEnv> env_;
  std::shared_ptr<ProbeKind> kind_;
  std::shared_ptr<PeerProbe> probe_;
};

TEST_F(GrpcProbeTest, ChecksTheHealthResponderOnLoopback) {
  responders::GrpcHealthServer server(net::HostPort{boost::asio::ip::make_address("127.0.0.1"), 0});
  ASSERT_NE(server.port(), 0);
  GrpcOptions o;
  o.count = 5;
  o.spacing = 10ms;
  o.timeout = 1s;
  o.port = server.port();
  ASSERT_TRUE(RunRound(o, "127.0.0.1"));
  EXPECT_EQ(Requests("OK"), 5);
  auto h = FindSeries(metrics_.registry(), "podnet_grpc_request_duration_seconds", labels_);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->histogram.sample_count, 5u);
  probe_->RemoveSeries();
  EXPECT_EQ(Requests("OK"), -1);
}

TEST_F(GrpcProbeTest, NothingListeningIsUnavailableAndTheRoundEnds) {
  GrpcOptions o;
  o.count = 3;
  o.spacing = 10ms;
  o.timeout = 300ms;
  o.port = 1;  // nothing listens on 127.0.0.1:1
  ASSERT_TRUE(RunRound(o, "127.0.0.1"));
  EXPECT_EQ(Requests("UNAVAILABLE"), 3);
  auto l = labels_;
  l["probe"] = "grpc";
  l["reason"] = "unavailable";
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_probe_errors_total", l), 3);
}

}  // namespace
}  // namespace podnet::probes::grpc
