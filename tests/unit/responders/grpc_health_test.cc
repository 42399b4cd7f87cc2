#include "exporter/responders/grpc_health.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <string_view>
#include <vector>

#include "tests/unit/testing/loop.h"

namespace podnet::responders {
namespace {

using namespace std::chrono_literals;
using boost::asio::ip::tcp;
using podnet::testing::CounterValue;
using podnet::testing::Eventually;

const std::string kCheck = "/grpc.health.v1.Health/Check";

net::HostPort Loopback() { return {boost::asio::ip::make_address("127.0.0.1"), 0}; }

double Dropped(prometheus::Registry& registry, const char* reason) {
  return CounterValue(registry, "podnet_responder_dropped_total",
                      {{"responder", "grpc"}, {"reason", reason}});
}

// One unary call with gRPC's generic stub, as any client makes it; its status code.
::grpc::StatusCode Call(::grpc::GenericStub& stub, const std::string& method,
                        const std::string& request) {
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  ::grpc::Slice slice(request);
  ::grpc::ByteBuffer req(&slice, 1);
  ::grpc::ByteBuffer resp;
  std::promise<::grpc::StatusCode> done;
  stub.UnaryCall(&ctx, method, ::grpc::StubOptions(), &req, &resp,
                 [&](const ::grpc::Status& s) { done.set_value(s.error_code()); });
  return done.get_future().get();
}

struct Client {
  explicit Client(std::uint16_t port)
      : channel(::grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                      ::grpc::InsecureChannelCredentials())),
        stub(channel) {}
  std::shared_ptr<::grpc::Channel> channel;
  ::grpc::GenericStub stub;
};

// HTTP/2 by hand (RFC 9113 frames; RFC 7541 HPACK literals without Huffman coding), for what
// no well-behaved client sends.
std::string Frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
                  std::string_view payload = {}) {
  std::string f;
  const auto n = static_cast<std::uint32_t>(payload.size());
  for (int shift : {16, 8, 0}) f += static_cast<char>((n >> shift) & 0xff);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  for (int shift : {24, 16, 8, 0}) f += static_cast<char>((stream >> shift) & 0xff);
  return f.append(payload);
}
constexpr std::uint8_t kData = 0, kHeaders = 1, kRstStream = 3, kSettings = 4;
constexpr std::uint8_t kEndStream = 0x1, kEndHeaders = 0x4;
const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// The request fields of a call to `path`: the first block adds them to the HPACK table
// (literals with incremental indexing), a later one names them by index (62.., newest first).
std::string RequestBlock(const std::string& path, bool first) {
  const std::vector<std::pair<std::string, std::string>> fields = {
      {":method", "POST"},
      {":scheme", "http"},
      {":path", path},
      {":authority", "podnet"},
      {"content-type", "application/grpc"},
      {"te", "trailers"}};
  std::string block;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (first) {
      const auto& [name, value] = fields[i];
      block += '\x40';
      block += static_cast<char>(name.size());
      block += name;
      block += static_cast<char>(value.size());
      block += value;
    } else {
      block += static_cast<char>(0x80 | (62 + fields.size() - 1 - i));
    }
  }
  return block;
}

// A TCP connection from `source` (any 127/8 address is this host's loopback) that has sent the
// HTTP/2 preface and an empty SETTINGS frame, or tried to: one the server refuses may be reset
// before (Ends says so).
tcp::socket Open(boost::asio::io_context& io, const char* source, std::uint16_t port) {
  tcp::socket s(io);
  s.open(tcp::v4());
  s.bind({boost::asio::ip::make_address(source), 0});
  boost::system::error_code ec;
  s.connect({boost::asio::ip::make_address("127.0.0.1"), port}, ec);
  if (!ec) boost::asio::write(s, boost::asio::buffer(kPreface + Frame(kSettings, 0, 0)), ec);
  return s;
}

// Whether the server ends `s` (EOF or reset) within `limit`; what it sends is read and dropped.
bool Ends(tcp::socket& s, std::chrono::milliseconds limit) {
  boost::system::error_code ec;
  s.non_blocking(true, ec);
  if (ec) return true;  // never connected
  return Eventually(
      [&] {
        char buf[4096];
        boost::system::error_code ec;
        s.read_some(boost::asio::buffer(buf), ec);
        return ec && ec != boost::asio::error::would_block;
      },
      limit);
}

// Every call the health responder receives is counted once, by outcome: calls made with
// gRPC's generic stub, as any client's (an empty Check request: the server's overall health).
TEST(GrpcHealthResponderTest, CountsEveryCallByOutcome) {
  prometheus::Registry registry;
  GrpcHealthServer server(Loopback(), registry);
  Client c(server.port());
  EXPECT_EQ(Call(c.stub, kCheck, ""), ::grpc::StatusCode::OK);
  EXPECT_EQ(Call(c.stub, kCheck, ""), ::grpc::StatusCode::OK);
  EXPECT_EQ(Call(c.stub, kCheck, std::string("\x0a\x04nope", 6)), ::grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Call(c.stub, "/podnet.Nothing/Here", ""), ::grpc::StatusCode::UNIMPLEMENTED);
  auto value = [&](const char* family, const char* key, const char* v) {
    return CounterValue(registry, family, {{"responder", "grpc"}, {key, v}});
  };
  // The server counts before it sends the status the client waited for.
  EXPECT_EQ(value("podnet_responder_requests_total", "result", "answered"), 2);
  EXPECT_EQ(value("podnet_responder_requests_total", "result", "ignored"), 2);
  EXPECT_EQ(Dropped(registry, "not_found"), 1);
  EXPECT_EQ(Dropped(registry, "unimplemented"), 1);
  EXPECT_EQ(Dropped(registry, "error"), 0);
  EXPECT_EQ(server.open_connections(), 1);
}

// HTTP/2 rapid reset (CVE-2023-44487): every stream opened and reset at once, 28 bytes each.
// gRPC would make a call of each (tens of thousands a second, ~11 KiB apiece, none of them
// counted against its stream limit); the responder closes the connection once its source has
// sent its input budget, long before 100,000 streams, and answers everyone else.
TEST(GrpcHealthResponderTest, ARapidResetIsClosedAndOthersAreStillAnswered) {
  prometheus::Registry registry;
  GrpcHealthServer server(Loopback(), registry);
  boost::asio::io_context io;
  tcp::socket s = Open(io, "127.0.0.2", server.port());
  boost::system::error_code ec;
  int streams = 0;
  for (; streams < 100'000 && !ec; streams += 64) {
    std::string chunk;
    for (int i = 0; i < 64; ++i) {
      const auto id = static_cast<std::uint32_t>(2 * (streams + i) + 1);
      chunk += Frame(kHeaders, kEndHeaders, id, RequestBlock(kCheck, streams + i == 0));
      chunk += Frame(kRstStream, 0, id, std::string("\0\0\0\x08", 4));  // CANCEL
    }
    boost::asio::write(s, boost::asio::buffer(chunk), ec);
  }
  // (Our writes may all succeed: once shut down, the socket takes and drops what comes.)
  EXPECT_TRUE(Ends(s, 5000ms));
  EXPECT_TRUE(Eventually([&] { return Dropped(registry, "input_budget") >= 1; }));
  // The calls gRPC made before the cut, once all are counted: a few hundred at most, not one
  // per stream.
  auto failed = [&] {
    return CounterValue(registry, "podnet_responder_requests_total",
                        {{"responder", "grpc"}, {"result", "failed"}});
  };
  double calls = -1;
  Eventually([&] {
    double before = calls;
    std::this_thread::sleep_for(200ms);
    return (calls = failed()) == before;
  });
  EXPECT_LT(calls, 5000) << streams << " streams sent";
  // Its source is refused until its budget has refilled; any other is answered.
  tcp::socket again = Open(io, "127.0.0.2", server.port());
  EXPECT_TRUE(Ends(again, 2000ms));
  Client c(server.port());
  EXPECT_EQ(Call(c.stub, kCheck, ""), ::grpc::StatusCode::OK);
}

// A connection that sends nothing more after its preface loses its slot after idle_timeout;
// one whose client calls every 100 ms keeps it.
TEST(GrpcHealthResponderTest, AnIdleConnectionTimesOut) {
  GrpcConnectionLimits limits;
  limits.idle_timeout = 400ms;
  prometheus::Registry registry;
  GrpcHealthServer server(Loopback(), registry, limits);
  boost::asio::io_context io;
  tcp::socket idle = Open(io, "127.0.0.2", server.port());
  const auto opened = std::chrono::steady_clock::now();
  Client c(server.port());
  for (int i = 0; i < 12; ++i) {
    ASSERT_EQ(Call(c.stub, kCheck, ""), ::grpc::StatusCode::OK) << i;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(Ends(idle, 5000ms));
  EXPECT_GE(std::chrono::steady_clock::now() - opened, limits.idle_timeout);
  EXPECT_EQ(Dropped(registry, "idle_timeout"), 1);  // the silent one only
  EXPECT_EQ(server.open_connections(), 1);
}

// Every slot held by one source's idle connections: a new source gets one of them at once, and
// the source that lost it cannot take it back while over its fair share.
TEST(GrpcHealthResponderTest, ANewSourceTakesASlotFromTheLargestHolder) {
  GrpcConnectionLimits limits;
  limits.max_connections = 4;
  limits.max_connections_per_source = 4;
  prometheus::Registry registry;
  GrpcHealthServer server(Loopback(), registry, limits);
  boost::asio::io_context io;
  std::vector<tcp::socket> held;
  for (int i = 0; i < 4; ++i) held.push_back(Open(io, "127.0.0.2", server.port()));
  ASSERT_TRUE(Eventually([&] { return server.open_connections() == 4; }));
  Client c(server.port());
  EXPECT_EQ(Call(c.stub, kCheck, ""), ::grpc::StatusCode::OK);
  EXPECT_EQ(Dropped(registry, "evicted"), 1);
  int ended = 0;
  for (auto& s : held) ended += Ends(s, 200ms);
  EXPECT_EQ(ended, 1);
  tcp::socket back = Open(io, "127.0.0.2", server.port());
  EXPECT_TRUE(Ends(back, 2000ms));
  EXPECT_EQ(Dropped(registry, "connection_limit"), 1);
  EXPECT_EQ(Call(c.stub, kCheck, ""), ::grpc::StatusCode::OK);
}

// A client that never acknowledges our SETTINGS is not held to max_concurrent_streams by
// gRPC; the calls it keeps open (Watch streams, answered and never ended) are counted, and
// past max_calls_per_connection its connection is closed.
TEST(GrpcHealthResponderTest, TooManyOpenCallsCloseTheConnection) {
  prometheus::Registry registry;
  GrpcHealthServer server(Loopback(), registry);
  boost::asio::io_context io;
  tcp::socket s = Open(io, "127.0.0.2", server.port());
  std::string watches;
  for (std::uint32_t i = 0; i < 12; ++i) {
    watches += Frame(kHeaders, kEndHeaders, 2 * i + 1,
                     RequestBlock("/grpc.health.v1.Health/Watch", i == 0));
    watches += Frame(kData, kEndStream, 2 * i + 1, std::string(5, '\0'));  // an empty request
  }
  boost::asio::write(s, boost::asio::buffer(watches));
  EXPECT_TRUE(Ends(s, 5000ms));
  EXPECT_EQ(Dropped(registry, "too_many_calls"), 1);
  EXPECT_EQ(Dropped(registry, "input_budget"), 0);
}

}  // namespace
}  // namespace podnet::responders
