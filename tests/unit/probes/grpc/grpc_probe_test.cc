#include "exporter/probes/grpc/grpc_probe.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <future>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <memory>
#include <prometheus/registry.h>
#include <string>
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
  prometheus::Registry responder_registry;
  responders::GrpcHealthServer server(net::HostPort{boost::asio::ip::make_address("127.0.0.1"), 0},
                                      responder_registry);
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
  EXPECT_EQ(CounterValue(responder_registry, "podnet_responder_requests_total",
                         {{"responder", "grpc"}, {"result", "answered"}}),
            5);
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

// Every call the health responder receives is counted once, by outcome: calls made with
// gRPC's generic stub, as any client's (an empty Check request: the server's overall health).
TEST(GrpcHealthResponderTest, CountsEveryCallByOutcome) {
  prometheus::Registry registry;
  responders::GrpcHealthServer server(net::HostPort{boost::asio::ip::make_address("127.0.0.1"), 0},
                                      registry);
  auto channel = ::grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port()),
                                       ::grpc::InsecureChannelCredentials());
  ::grpc::GenericStub stub(channel);
  auto call = [&](const std::string& method, const std::string& request) {
    ::grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    ::grpc::Slice slice(request);
    ::grpc::ByteBuffer req(&slice, 1);
    ::grpc::ByteBuffer resp;
    std::promise<::grpc::StatusCode> done;
    stub.UnaryCall(&ctx, method, ::grpc::StubOptions(), &req, &resp,
                   [&](const ::grpc::Status& s) { done.set_value(s.error_code()); });
    return done.get_future().get();
  };
  const std::string kCheck = "/grpc.health.v1.Health/Check";
  EXPECT_EQ(call(kCheck, ""), ::grpc::StatusCode::OK);
  EXPECT_EQ(call(kCheck, ""), ::grpc::StatusCode::OK);
  EXPECT_EQ(call(kCheck, std::string("\x0a\x04nope", 6)), ::grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(call("/podnet.Nothing/Here", ""), ::grpc::StatusCode::UNIMPLEMENTED);
  auto value = [&](const char* family, const char* key, const char* v) {
    return CounterValue(registry, family, {{"responder", "grpc"}, {key, v}});
  };
  // The server counts before it sends the status the client waited for.
  EXPECT_EQ(value("podnet_responder_requests_total", "result", "answered"), 2);
  EXPECT_EQ(value("podnet_responder_requests_total", "result", "ignored"), 2);
  EXPECT_EQ(value("podnet_responder_dropped_total", "reason", "not_found"), 1);
  EXPECT_EQ(value("podnet_responder_dropped_total", "reason", "unimplemented"), 1);
  EXPECT_EQ(value("podnet_responder_dropped_total", "reason", "error"), 0);
}

}  // namespace
}  // namespace podnet::probes::grpc
