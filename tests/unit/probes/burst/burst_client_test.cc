// The burst engine against our responder on loopback: a whole iperf3 exchange, the refusals,
// and peers that stall or die mid-burst (deadlines, no fd leak).
#include "exporter/probes/burst/burst_client.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <future>
#include <optional>
#include <thread>

#include "exporter/responders/burst_server.h"
#include "exporter/wire/iperf3.h"
#include "tests/unit/testing/loop.h"

namespace podnet::probes::burst {

namespace iperf3 = wire::iperf3;
namespace {

using config::kinds::burst::BurstResponderOptions;

using namespace std::chrono_literals;
using boost::asio::ip::tcp;
using podnet::testing::OpenFds;

BurstResult RunBurst(BurstRequest req) {
  boost::asio::io_context io;
  BurstResult result;
  int calls = 0;
  auto c = BurstClient::Start(io, req, [&](const BurstResult& r) {
    result = r;
    ++calls;
  });
  io.run();  // returns when every handler and socket of the burst is gone
  EXPECT_EQ(calls, 1);
  return result;
}

// podnet_responder_dropped_total{responder="burst", reason}.
double Dropped(prometheus::Registry& registry, const std::string& reason) {
  return testing::CounterValue(registry, "podnet_responder_dropped_total",
                               {{"responder", "burst"}, {"reason", reason}});
}

BurstResponderOptions Loopback() {
  BurstResponderOptions o;
  o.listen_address = {boost::asio::ip::make_address("127.0.0.1"), 0};
  o.max_duration = 3s;
  o.max_clients = 1;
  o.max_streams = 4;
  o.any_client = true;  // no discovery here: every source, as with `clients: any`
  return o;
}

BurstRequest To(std::uint16_t port, int streams) {
  BurstRequest r;
  r.server = {boost::asio::ip::make_address("127.0.0.1"), port};
  r.streams = streams;
  r.duration = 300ms;
  r.step_timeout = 1s;
  return r;
}

TEST(BurstClientTest, OursAgainstOursOnLoopback) {
  prometheus::Registry registry;
  responders::BurstResponder server(Loopback(), registry);
  int fds = OpenFds();
  for (int streams : {1, 3}) {
    BurstResult r = RunBurst(To(server.port(), streams));
    ASSERT_EQ(r.error, "") << r.detail;
    // The data phase runs for its 300 ms timer: no shorter (minus slack). The upper bound is 5x
    // that (1.5 s, x PODNET_TEST_TIME_SCALE) so a busy neighbour cannot fail it; it still
    // catches a burst that does not stop at its duration.
    EXPECT_GE(r.seconds, 0.25);
    EXPECT_LT(r.seconds, 1.5 * testing::TimeScale());
    EXPECT_GT(r.bytes_sent, 1'000'000u);
    // The receiver's count comes from its results; it read (nearly) all we wrote.
    EXPECT_GT(r.bytes_received, r.bytes_sent * 9 / 10);
    EXPECT_LE(r.bytes_received, r.bytes_sent);
    EXPECT_GT(r.throughput_bytes_per_second, 1e6);
    ASSERT_EQ(r.streams.size(), static_cast<std::size_t>(streams));
    for (const auto& s : r.streams) EXPECT_GT(s.bytes_received, 0u);
    EXPECT_GT(r.rtt_seconds, 0);
    EXPECT_GT(r.snd_cwnd_bytes, 0u);
    EXPECT_GT(r.pmtu, 0u);
    EXPECT_GT(r.cpu_seconds, 0);
    EXPECT_GE(r.intervals.size(), 2u);           // 100 ms samples
    EXPECT_GT(r.wire_bytes_sent, r.bytes_sent);  // headers and the control connection
    EXPECT_GT(r.wire_bytes_received, 0u);        // ACKs
  }
  EXPECT_TRUE(testing::Eventually([&] { return server.active_tests() == 0; }));
  EXPECT_EQ(OpenFds(), fds);
  EXPECT_EQ(testing::CounterValue(registry, "podnet_responder_requests_total",
                                  {{"responder", "burst"}, {"result", "completed"}}),
            2);
}

TEST(BurstClientTest, ByteCapEndsTheBurstEarly) {
  prometheus::Registry registry;
  responders::BurstResponder server(Loopback(), registry);
  auto req = To(server.port(), 2);
  req.duration = 2s;
  req.max_bytes = 2'000'000;
  BurstResult r = RunBurst(req);
  ASSERT_EQ(r.error, "") << r.detail;
  EXPECT_TRUE(r.budget_cut);
  EXPECT_LE(r.bytes_sent, 2'000'000u);
  EXPECT_LT(r.seconds, 1.5);
}

TEST(BurstClientTest, ResponderRefusesLongTestsAndTooManyStreams) {
  prometheus::Registry registry;
  responders::BurstResponder server(Loopback(), registry);
  auto req = To(server.port(), 1);
  req.duration = 5s;  // > max_duration 3s
  BurstResult r = RunBurst(req);
  EXPECT_EQ(r.error, "server_error");
  EXPECT_NE(r.detail.find("i_errno=5"), std::string::npos) << r.detail;  // IEDURATION
  r = RunBurst(To(server.port(), 5));                                    // > max_streams 4
  EXPECT_EQ(r.error, "server_error");
  EXPECT_NE(r.detail.find("i_errno=6"), std::string::npos) << r.detail;  // IENUMSTREAMS
  // The responder counts a refusal after it has sent it: the client may read it first.
  EXPECT_TRUE(testing::Eventually([&] {
    return testing::CounterValue(registry, "podnet_responder_requests_total",
                                 {{"responder", "burst"}, {"result", "refused"}}) == 2 &&
           Dropped(registry, "too_many_streams") == 1;
  }));
  EXPECT_EQ(Dropped(registry, "too_long"), 1);
  EXPECT_EQ(Dropped(registry, "too_many_streams"), 1);
  EXPECT_EQ(Dropped(registry, "busy"), 0);
}

TEST(BurstClientTest, BusyResponderDeniesASecondClient) {
  prometheus::Registry registry;
  responders::BurstResponder server(Loopback(), registry);  // max_clients 1
  // A first client that connects, sends its cookie and then holds the slot.
  boost::asio::io_context io;
  tcp::socket holder(io);
  holder.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  std::string cookie(36, 'a');
  cookie.push_back('\0');
  boost::asio::write(holder, boost::asio::buffer(cookie));
  ASSERT_TRUE(testing::Eventually([&] { return server.active_tests() == 1; }));
  BurstResult r = RunBurst(To(server.port(), 1));
  EXPECT_EQ(r.error, "access_denied") << r.detail;
  EXPECT_EQ(Dropped(registry, "busy"), 1);
  EXPECT_EQ(testing::CounterValue(registry, "podnet_responder_requests_total",
                                  {{"responder", "burst"}, {"result", "access_denied"}}),
            1);
  holder.close();
}

// A raw client from `source` that sends its cookie and reads PARAM_EXCHANGE (the responder then
// holds a slot for it), or nothing when the responder refused it.
std::optional<tcp::socket> TakeSlot(boost::asio::io_context& io, const char* source,
                                    std::uint16_t port, char fill) {
  tcp::socket s(io);
  s.open(tcp::v4());
  s.bind({boost::asio::ip::make_address(source), 0});
  s.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  std::string cookie(36, fill);
  cookie.push_back('\0');
  boost::asio::write(s, boost::asio::buffer(cookie));
  std::int8_t state = 0;
  boost::system::error_code ec;
  boost::asio::read(s, boost::asio::buffer(&state, 1), ec);
  if (ec || state != iperf3::kParamExchange) return std::nullopt;
  return s;
}

// A holder that stalls after its cookie loses its slot at the parameters' deadline (2 s), to a
// client waiting in line; its source, penalized, is refused while the slot is taken.
TEST(BurstClientTest, AStalledHolderGivesWayToAWaitingClient) {
  prometheus::Registry registry;
  responders::BurstResponder server(Loopback(), registry);  // max_clients 1
  boost::asio::io_context io;
  auto holder = TakeSlot(io, "127.0.0.2", server.port(), 'a');
  ASSERT_TRUE(holder);
  auto req = To(server.port(), 1);
  req.step_timeout = 5s;  // longer than the wait in line (3 s)
  req.duration = 1s;
  std::future<BurstResult> burst = std::async(std::launch::async, [&] { return RunBurst(req); });
  // While the client tests, the penalized source finds no slot: ACCESS_DENIED at once.
  ASSERT_TRUE(testing::Eventually([&] { return Dropped(registry, "timeout") == 1; }, 5000ms));
  EXPECT_TRUE(testing::Eventually([&] { return server.active_tests() == 1; }));
  EXPECT_FALSE(TakeSlot(io, "127.0.0.2", server.port(), 'b'));
  BurstResult r = burst.get();
  EXPECT_EQ(r.error, "") << r.detail;
  EXPECT_EQ(Dropped(registry, "penalty"), 1);
  EXPECT_EQ(Dropped(registry, "busy"), 0);
}

// A client that connects its stream and then trickles 1 byte every 100 ms is cut as stalled at
// its first data window (2 s), not after its test's 3 s + the 2 s grace. The bound, 4.5 s, is
// what the old deadline (time + 5 s = 8 s) would exceed.
TEST(BurstClientTest, ATricklingClientIsCutAsStalled) {
  prometheus::Registry registry;
  responders::BurstResponder server(Loopback(), registry);  // max_duration 3s
  boost::asio::io_context io;
  auto control = TakeSlot(io, "127.0.0.2", server.port(), 'c');
  ASSERT_TRUE(control);
  std::string params = R"({"tcp": true, "time": 3, "parallel": 1})";
  std::string framed(4, '\0');
  framed[3] = static_cast<char>(params.size());
  boost::asio::write(*control, boost::asio::buffer(framed + params));
  std::int8_t state = 0;
  boost::asio::read(*control, boost::asio::buffer(&state, 1));
  ASSERT_EQ(state, iperf3::kCreateStreams);
  tcp::socket stream(io);
  stream.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  std::string cookie(36, 'c');
  cookie.push_back('\0');
  boost::asio::write(stream, boost::asio::buffer(cookie));
  std::array<std::int8_t, 2> two{};
  boost::asio::read(*control, boost::asio::buffer(two));
  ASSERT_EQ(two[1], iperf3::kTestRunning);
  auto start = std::chrono::steady_clock::now();
  boost::system::error_code ec;
  while (!ec && std::chrono::steady_clock::now() - start < 10s) {
    boost::asio::write(stream, boost::asio::buffer("x", 1), ec);
    std::this_thread::sleep_for(100ms);
    if (Dropped(registry, "stalled") == 1) break;
  }
  EXPECT_EQ(Dropped(registry, "stalled"), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4500ms * testing::TimeScale());
  EXPECT_EQ(Dropped(registry, "timeout"), 0);
}

// What the responder refuses before or instead of a test, sent as a client would send it: each
// is counted once as podnet_responder_dropped_total{responder="burst", reason}.
TEST(BurstClientTest, RefusalsAreCountedByReason) {
  prometheus::Registry registry;
  auto options = Loopback();
  options.max_clients = 4;
  responders::BurstResponder server(options, registry);
  boost::asio::io_context io;
  auto connect = [&] {
    tcp::socket s(io);
    s.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
    return s;
  };
  // Sends a cookie and, once asked for them (PARAM_EXCHANGE), `params` as framed JSON text;
  // returns the state byte the responder answers with, then reads to its close.
  char next_cookie = 'a';  // one cookie per test: a known cookie would make it a data stream
  auto send_params = [&](const std::string& params) {
    tcp::socket s = connect();
    std::string cookie(36, next_cookie++);
    cookie.push_back('\0');
    boost::asio::write(s, boost::asio::buffer(cookie));
    std::int8_t state = 0;
    boost::asio::read(s, boost::asio::buffer(&state, 1));
    EXPECT_EQ(state, iperf3::kParamExchange);
    std::string framed(4, '\0');
    for (int i = 0; i < 4; ++i) framed[i] = static_cast<char>(params.size() >> (24 - 8 * i));
    boost::asio::write(s, boost::asio::buffer(framed + params));
    boost::system::error_code ec;
    boost::asio::read(s, boost::asio::buffer(&state, 1), ec);
    std::array<char, 64> rest;
    while (!ec) s.read_some(boost::asio::buffer(rest), ec);  // until the responder closes
    return state;
  };
  auto wait_dropped = [&](const char* reason, double n) {
    EXPECT_TRUE(testing::Eventually([&] { return Dropped(registry, reason) == n; }))
        << reason << ": " << Dropped(registry, reason);
  };

  EXPECT_EQ(send_params(R"({"tcp": true, "reverse": true, "time": 1, "parallel": 1})"),
            iperf3::kAccessDenied);
  wait_dropped("unsupported", 1);
  send_params("{{{{");
  wait_dropped("malformed", 1);
  send_params(R"({"tcp": true, "time": 1, "parallel": 0})");  // parallel must be >= 1
  wait_dropped("malformed", 2);

  // 37 bytes that are not a cookie.
  {
    tcp::socket s = connect();
    boost::asio::write(s, boost::asio::buffer(std::string(37, 'x')));
    wait_dropped("malformed", 3);
  }
  // 17 connections from one source that send nothing: the 17th makes room by closing the first.
  {
    std::vector<tcp::socket> waiting;
    for (int i = 0; i < 17; ++i) waiting.push_back(connect());
    wait_dropped("pending_limit", 1);
  }  // the other 16 close before their 2 s are up: not requests, not counted
  // One that stays silent past the cookie deadline (2 s).
  {
    tcp::socket s = connect();
    EXPECT_TRUE(testing::Eventually([&] { return Dropped(registry, "timeout") == 1; }, 5000ms));
  }
  EXPECT_EQ(testing::CounterValue(registry, "podnet_responder_requests_total",
                                  {{"responder", "burst"}, {"result", "no_cookie"}}),
            3);  // the bad cookie, the one closed for room, the silent one
  EXPECT_EQ(testing::CounterValue(registry, "podnet_responder_requests_total",
                                  {{"responder", "burst"}, {"result", "failed"}}),
            2);  // the two parameter sets that do not decode
  EXPECT_EQ(Dropped(registry, "unsupported"), 1);
  EXPECT_EQ(Dropped(registry, "pending_limit"), 1);
  EXPECT_EQ(Dropped(registry, "busy"), 0);
}

// A server that accepts and reads but never answers: every step must time out.
TEST(BurstClientTest, SilentServerTimesOut) {
  boost::asio::io_context io;
  tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  int fds = OpenFds();
  auto req = To(acceptor.local_endpoint().port(), 1);
  req.step_timeout = 300ms;
  auto start = std::chrono::steady_clock::now();
  BurstResult r = RunBurst(req);
  EXPECT_EQ(r.error, "timeout") << r.detail;
  // One step's timeout (300 ms) ends it; the bound is over 5x that (2 s, x
  // PODNET_TEST_TIME_SCALE) so a busy neighbour cannot fail it, while a step without a deadline
  // still does.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s * testing::TimeScale());
  EXPECT_EQ(OpenFds(), fds);
}

TEST(BurstClientTest, NothingListeningIsAConnectError) {
  auto req = To(1, 1);  // port 1 on loopback: refused
  BurstResult r = RunBurst(req);
  EXPECT_EQ(r.error, "connect") << r.detail;
}

// The responder goes away mid-burst: the client ends with an error well within its deadline.
TEST(BurstClientTest, ResponderDyingMidBurstEndsTheBurst) {
  auto registry = std::make_unique<prometheus::Registry>();
  auto options = Loopback();
  options.max_duration = 10s;
  auto server = std::make_unique<responders::BurstResponder>(options, *registry);
  int fds = OpenFds();
  auto req = To(server->port(), 2);
  req.duration = 10s;  // far beyond the bound below: a client that runs it out fails
  std::thread killer([&] {
    std::this_thread::sleep_for(500ms);
    server.reset();  // closes every socket of the test
  });
  auto start = std::chrono::steady_clock::now();
  BurstResult r = RunBurst(req);
  killer.join();
  EXPECT_EQ(r.error, "connection_lost") << r.detail;
  // It ends ~500 ms in, when the responder dies; the bound is 5x that (2.5 s, x
  // PODNET_TEST_TIME_SCALE) so a busy neighbour cannot fail it.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2500ms * testing::TimeScale());
  EXPECT_GT(r.bytes_sent, 0u);
  EXPECT_LE(OpenFds(), fds - 1);  // the listener went too
}

}  // namespace
}  // namespace podnet::probes::burst
