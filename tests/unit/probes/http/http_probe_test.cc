#include "exporter/probes/http/http_probe.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/beast/http/error.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "exporter/metrics/metrics.h"
#include "exporter/net/http_client.h"
#include "exporter/responders/http_server.h"
#include "tests/unit/testing/loop.h"

namespace podnet::probes::http {
namespace {

using namespace std::chrono_literals;
using net::http_client::Classify;
using net::http_client::FailureReason;
using podnet::testing::CounterValue;
using podnet::testing::FindSeries;
using podnet::testing::LoopThread;

const topology::Self kSelf{"probe-a", "node-1", "zone-a"};

topology::Peer MakePeer(std::uint16_t port) {
  topology::Peer p;
  p.name = "peer";
  p.address = boost::asio::ip::make_address("127.0.0.1");
  p.port = port;
  p.node = "node-1";
  p.zone = "zone-a";
  p.path = topology::Classify(kSelf, p.node, p.zone);
  return p;
}

// A listening TCP socket on 127.0.0.1, port chosen by the kernel.
int ListenOnLoopback(std::uint16_t* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  listen(fd, 64);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

// A misbehaving HTTP server on 127.0.0.1 (blocking sockets on a thread of its own): each
// connection reads one request head, then behaves as `mode` says. Bounded: every wait polls
// with a timeout and the thread stops with the object.
class FaultServer {
 public:
  explicit FaultServer(std::string mode) : mode_(std::move(mode)) {
    fd_ = ListenOnLoopback(&port_);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FaultServer() {
    stop_ = true;
    thread_.join();
    for (int c : held_) close(c);
    close(fd_);
  }
  std::uint16_t port() const { return port_; }

 private:
  bool Wait(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, ms) > 0;
  }
  void Serve() {
    while (!stop_) {
      if (!Wait(fd_, 20)) continue;
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string req;
      char buf[2048];
      for (int i = 0; i < 50 && req.find("\r\n\r\n") == std::string::npos; ++i) {
        if (!Wait(c, 20)) continue;
        ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        req.append(buf, static_cast<std::size_t>(n));
      }
      Respond(c);
    }
  }
  void Send(int c, const std::string& s) { (void)!write(c, s.data(), s.size()); }
  void Respond(int c) {
    if (mode_ == "blackhole") {
      held_.push_back(c);  // never answers, never closes
      return;
    }
    if (mode_ == "500") {
      Send(c,
           "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nConnection: "
           "close\r\n\r\nerr\n");
    } else if (mode_ == "garbage") {
      Send(c, "this is not http at all\r\n\r\n");
    } else if (mode_ == "big") {
      Send(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n");
      Send(c, std::string(100000, 'x'));
    } else if (mode_ == "reset") {
      Send(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial");
      std::this_thread::sleep_for(5ms);
      linger l{1, 0};  // close with RST
      setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    } else if (mode_ == "slow") {
      held_.push_back(c);
      Send(c, "H");  // one byte, then nothing more within the probe's timeout
      return;
    }
    close(c);
  }

  std::string mode_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<int> held_;
  std::thread thread_;
};

// A keep-alive HTTP/1.1 server on 127.0.0.1 that serves many requests per connection (one
// thread, poll over every connection; bounded by the object's life) in one of the ways real
// servers do that the probe must take as curl and Go's Transport do:
//  - "early_hints": each response is preceded by "103 Early Hints" with a Link header (every
//    other one in a separate write, so the final response comes in a later read);
//  - "idle_close": after 3 responses the server closes the idle connection (no
//    "Connection: close"), as request-count and idle limits do;
//  - "close_on_reuse": the first request of a connection is answered; at the second the server
//    closes without a byte (the idle-close race seen from the client);
//  - "raw": every request is answered with the bytes given (`response`), as they are.
class KeepAliveServer {
 public:
  explicit KeepAliveServer(std::string mode, std::string response = "")
      : mode_(std::move(mode)), response_(std::move(response)) {
    fd_ = ListenOnLoopback(&port_);
    thread_ = std::thread([this] { Serve(); });
  }
  ~KeepAliveServer() {
    stop_ = true;
    thread_.join();
    for (auto& c : conns_) close(c.fd);
    close(fd_);
  }
  std::uint16_t port() const { return port_; }
  int connections() const { return accepted_; }

 private:
  struct Conn {
    int fd;
    std::string in;
    int served = 0;
  };
  static void Send(int c, const std::string& s) { (void)!write(c, s.data(), s.size()); }
  void Serve() {
    const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\npodnet";
    const std::string hints =
        "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n";
    while (!stop_) {
      std::vector<pollfd> p{{fd_, POLLIN, 0}};
      for (auto& c : conns_) p.push_back({c.fd, POLLIN, 0});
      if (poll(p.data(), p.size(), 20) <= 0) continue;
      if (p[0].revents & POLLIN) {
        int c = accept(fd_, nullptr, nullptr);
        if (c >= 0) {
          conns_.push_back({c, {}, 0});
          ++accepted_;
        }
      }
      for (std::size_t i = 1; i < p.size(); ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        Conn& c = conns_[i - 1];
        char buf[2048];
        ssize_t n = read(c.fd, buf, sizeof buf);
        if (n <= 0) {
          close(c.fd);
          c.fd = -1;
          continue;
        }
        c.in.append(buf, static_cast<std::size_t>(n));
        std::size_t end;
        while (c.fd >= 0 && (end = c.in.find("\r\n\r\n")) != std::string::npos) {
          c.in.erase(0, end + 4);
          if (mode_ == "close_on_reuse" && c.served == 1) {
            close(c.fd);
            c.fd = -1;
            break;
          }
          if (mode_ == "early_hints") {
            if (c.served % 2 == 0) {
              Send(c.fd, hints + ok);
            } else {
              Send(c.fd, hints);
              std::this_thread::sleep_for(2ms);
              Send(c.fd, ok);
            }
          } else {
            Send(c.fd, mode_ == "raw" ? response_ : ok);
          }
          if (++c.served == 3 && mode_ == "idle_close") {
            std::this_thread::sleep_for(2ms);  // idle, then closed
            close(c.fd);
            c.fd = -1;
          }
        }
      }
      std::erase_if(conns_, [](const Conn& c) { return c.fd < 0; });
    }
  }

  std::string mode_;
  std::string response_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::vector<Conn> conns_;
  std::thread thread_;
};

class HttpProbeTest : public ::testing::Test {
 protected:
  HttpOptions Options() {
    HttpOptions o;
    o.interval = 10s;
    o.duration = 200ms;
    o.qps = 50;  // 10 requests per mode
    o.connections = 2;
    o.timeout = 300ms;
    o.max_body_bytes = 4096;
    return o;
  }

  // One round on the probe loop (this thread); true when `done` was called once in time.
  bool RunRound(const HttpOptions& o, std::uint16_t port, std::chrono::milliseconds limit = 5s) {
    env_ = std::make_unique<ProbeEnv>(ProbeEnv{io_, metrics_, kSelf});
    kind_ = MakeHttpKind(o, *env_);
    probe_ = kind_->ForPeer(MakePeer(port));
    int done = 0;
    probe_->Run(std::chrono::steady_clock::now(), [&] { ++done; });
    auto deadline = std::chrono::steady_clock::now() + limit;
    io_.restart();
    while (done == 0 && std::chrono::steady_clock::now() < deadline) io_.run_one_for(50ms);
    return done == 1;
  }

  prometheus::Labels Labels(std::uint16_t port) {
    return metrics::PeerLabels(kSelf, MakePeer(port), metrics::PeerLabelSet::kPerPeer);
  }

  double Requests(std::uint16_t port, const char* connection, const char* code) {
    auto l = Labels(port);
    l["connection"] = connection;
    l["code"] = code;
    return CounterValue(metrics_.registry(), "podnet_http_requests_total", l);
  }
  double Errors(std::uint16_t port, const char* reason) {
    auto l = Labels(port);
    l["probe"] = "http";
    l["reason"] = reason;
    return CounterValue(metrics_.registry(), "podnet_probe_errors_total", l);
  }
  std::uint64_t HistogramCount(const char* name, std::uint16_t port, const char* connection) {
    auto l = Labels(port);
    if (connection != nullptr) l["connection"] = connection;
    auto m = FindSeries(metrics_.registry(), name, l);
    return m ? m->histogram.sample_count : 0;
  }

  boost::asio::io_context io_;
  metrics::Metrics metrics_;
  std::unique_ptr<ProbeEnv> env_;
  std::shared_ptr<ProbeKind> kind_;
  std::shared_ptr<PeerProbe> probe_;
};

TEST(HttpClassifyTest, MapsErrorsToReasons) {
  namespace asio = boost::asio;
  EXPECT_STREQ(FailureReason(Classify(asio::error::connection_refused, false)), "refused");
  EXPECT_STREQ(FailureReason(Classify(boost::beast::error::timeout, false)), "timeout");
  EXPECT_STREQ(FailureReason(Classify(boost::beast::error::timeout, true)), "slow_response");
  EXPECT_STREQ(FailureReason(Classify(asio::error::connection_reset, true)), "reset");
  EXPECT_STREQ(FailureReason(Classify(boost::beast::http::error::partial_message, true)), "closed");
  EXPECT_STREQ(FailureReason(Classify(boost::beast::http::error::body_limit, true)),
               "body_too_large");
  EXPECT_STREQ(FailureReason(Classify(boost::beast::http::error::bad_version, true)),
               "malformed_response");
  EXPECT_STREQ(FailureReason(Classify(asio::error::host_unreachable, false)), "unreachable");
}

TEST_F(HttpProbeTest, BothModesAgainstTheBeastResponder) {
  LoopThread server_loop;
  auto server = server_loop.Run([&] {
    return std::make_unique<responders::HttpServer>(
        server_loop.io(), net::HostPort{boost::asio::ip::make_address("127.0.0.1"), 0},
        [](const responders::HttpRequest&) {
          return responders::HttpResponse{200, "text/plain", std::string(75, 'e')};
        });
  });
  std::uint16_t port = server->port();
  ASSERT_TRUE(RunRound(Options(), port));
  EXPECT_EQ(Requests(port, "keepalive", "200"), 10);
  EXPECT_EQ(Requests(port, "new", "200"), 10);
  EXPECT_EQ(HistogramCount("podnet_http_request_duration_seconds", port, "keepalive"), 10u);
  EXPECT_EQ(HistogramCount("podnet_http_request_duration_seconds", port, "new"), 10u);
  EXPECT_EQ(HistogramCount("podnet_http_time_to_first_byte_seconds", port, "new"), 10u);
  // Keep-alive: 2 connections opened before the run; new: one per request.
  EXPECT_EQ(HistogramCount("podnet_http_connect_duration_seconds", port, nullptr), 12u);
  // Byte counters carry the peer's zone and path class, not the peer (AddByteCounters).
  auto l = metrics::PeerLabels(kSelf, MakePeer(port), metrics::PeerLabelSet::kAggregated);
  l["probe"] = "http";
  EXPECT_GT(CounterValue(metrics_.registry(), "podnet_probe_received_bytes_total", l), 20 * 75);
  // RemoveSeries takes every series of the peer away.
  probe_->RemoveSeries();
  EXPECT_EQ(Requests(port, "keepalive", "200"), -1);
  server_loop.Run([&] { server.reset(); });
}

TEST_F(HttpProbeTest, RefusedWhenNothingListens) {
  std::uint16_t port;
  {
    FaultServer s("500");  // bound then closed: a port nothing listens on
    port = s.port();
  }
  ASSERT_TRUE(RunRound(Options(), port));
  EXPECT_EQ(Errors(port, "refused"), 20);
  EXPECT_EQ(Requests(port, "new", "error"), 10);
}

struct FaultCase {
  const char* mode;
  const char* reason;
  const char* code;  // requests_total code of the failed requests
};

class HttpFaultTest : public HttpProbeTest, public ::testing::WithParamInterface<FaultCase> {};

TEST_P(HttpFaultTest, CountsTheReasonAndEndsTheRound) {
  FaultServer server(GetParam().mode);
  HttpOptions o = Options();
  o.keepalive = false;  // one connection per request: one outcome per request
  o.qps = 20;           // 4 requests
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(RunRound(o, server.port()));
  // A round ends; it takes duration + timeout (500 ms) when all goes well. The bound is 5x that
  // (2.5 s, x PODNET_TEST_TIME_SCALE) so a busy neighbour cannot fail it; it still catches a
  // round that never ends.
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            5 * (o.duration + o.timeout) * podnet::testing::TimeScale());
  EXPECT_EQ(Errors(server.port(), GetParam().reason), 4) << GetParam().mode;
  EXPECT_EQ(Requests(server.port(), "new", GetParam().code), 4);
  EXPECT_EQ(HistogramCount("podnet_http_request_duration_seconds", server.port(), "new"), 0u);
}

INSTANTIATE_TEST_SUITE_P(Faults, HttpFaultTest,
                         ::testing::Values(FaultCase{"blackhole", "timeout", "error"},
                                           FaultCase{"500", "bad_status", "500"},
                                           FaultCase{"garbage", "malformed_response", "error"},
                                           FaultCase{"big", "body_too_large", "error"},
                                           FaultCase{"reset", "reset", "error"},
                                           FaultCase{"slow", "slow_response", "error"}),
                         [](const auto& info) {
                           return std::string(info.param.mode == std::string("500")
                                                  ? "status500"
                                                  : info.param.mode);
                         });

TEST_F(HttpProbeTest, QueuedRequestsAreLateAndTimedFromTheirIntendedStart) {
  // One connection to a server that never answers: each request holds the connection for its
  // whole timeout, so the following ones wait (late) and most expire in the queue.
  FaultServer server("blackhole");
  HttpOptions o = Options();
  o.new_connection = false;
  o.connections = 1;
  o.qps = 50;
  o.duration = 200ms;  // 10 requests
  o.timeout = 100ms;
  ASSERT_TRUE(RunRound(o, server.port()));
  auto l = Labels(server.port());
  l["connection"] = "keepalive";
  double late = CounterValue(metrics_.registry(), "podnet_http_late_requests_total", l);
  EXPECT_GE(late, 5);
  EXPECT_EQ(Errors(server.port(), "timeout"), 10);
}

}  // namespace
}  // namespace podnet::probes::http

namespace podnet::probes::http {
namespace {

// Counter values; -1 (CounterValue) when the series does not exist, so "none" is <= 0.
double Reconnects(metrics::Metrics& m, const prometheus::Labels& peer, const char* reason) {
  auto l = peer;
  l["reason"] = reason;
  return CounterValue(m.registry(), "podnet_http_reconnects_total", l);
}

// RFC 9110 15.2 (curl: 200 every time): interim 1xx responses are read and skipped; the
// request counts under its final status, its TTFB and latency are the final response's.
TEST_F(HttpProbeTest, EarlyHintsAreSkippedForTheFinalResponse) {
  KeepAliveServer server("early_hints");
  HttpOptions o = Options();
  ASSERT_TRUE(RunRound(o, server.port()));
  EXPECT_EQ(Requests(server.port(), "keepalive", "200"), 10);
  EXPECT_EQ(Requests(server.port(), "new", "200"), 10);
  EXPECT_LE(Requests(server.port(), "keepalive", "103"), 0);  // no series
  EXPECT_LE(Errors(server.port(), "bad_status"), 0);
  EXPECT_EQ(HistogramCount("podnet_http_request_duration_seconds", server.port(), "keepalive"),
            10u);
  // Kept alive across the interim responses: the 2 connections opened before the run.
  EXPECT_EQ(server.connections(), 2 + 10);
}

// A server that closes idle keep-alive connections after 3 responses (curl and Go: 0 errors,
// a new connection when the FIN is seen): no request is written into a closed connection.
TEST_F(HttpProbeTest, IdleClosedConnectionsAreReplacedBeforeReuse) {
  KeepAliveServer server("idle_close");
  HttpOptions o = Options();
  o.new_connection = false;
  o.connections = 1;
  o.qps = 50;
  o.duration = 400ms;  // 20 requests, 10 ms apart, on one connection at a time
  ASSERT_TRUE(RunRound(o, server.port()));
  EXPECT_EQ(Requests(server.port(), "keepalive", "200"), 20);
  EXPECT_LE(Requests(server.port(), "keepalive", "error"), 0);
  // Closed after responses 3, 6, ... 18: six replaced connections, found closed before reuse
  // (or, when the server's close came late on a busy machine, retried once).
  double idle = std::max(0.0, Reconnects(metrics_, Labels(server.port()), "idle_closed"));
  double retried = std::max(0.0, Reconnects(metrics_, Labels(server.port()), "retried"));
  EXPECT_EQ(idle + retried, 6);
  EXPECT_GE(idle, 1);
  EXPECT_EQ(server.connections(), 7);
}

// The close races the request: nothing came back on the reused connection, so the request is
// sent once more on a new one (curl: "Connection died, retrying a fresh connect"; Go: retry of
// an idempotent request that got no response). A first request on a new connection is not
// retried.
TEST_F(HttpProbeTest, RequestThatGotNothingOnAReusedConnectionIsRetriedOnce) {
  KeepAliveServer server("close_on_reuse");
  HttpOptions o = Options();
  o.new_connection = false;
  o.connections = 1;
  o.qps = 50;
  o.duration = 200ms;  // 10 requests
  ASSERT_TRUE(RunRound(o, server.port()));
  EXPECT_EQ(Requests(server.port(), "keepalive", "200"), 10);
  EXPECT_LE(Requests(server.port(), "keepalive", "error"), 0);
  EXPECT_EQ(Reconnects(metrics_, Labels(server.port()), "retried"), 9);
}

// A response cut short is an error, not retried: the server may have acted on the request.
TEST_F(HttpProbeTest, PartialResponseIsNotRetried) {
  FaultServer server("reset");
  HttpOptions o = Options();
  o.new_connection = false;
  o.connections = 1;
  o.qps = 20;  // 4 requests
  ASSERT_TRUE(RunRound(o, server.port()));
  EXPECT_EQ(Errors(server.port(), "reset"), 4);
  EXPECT_LE(Reconnects(metrics_, Labels(server.port()), "retried"), 0);
}

// Response framing (docs/probes.md, "Response framing"): one raw response per case, served on
// every request of a keep-alive connection. `reason` empty: curl and python's http.client take
// it (200, connection reused), and so must the probe; else the probe counts that reason.
struct FramingCase {
  const char* name;
  const char* response;
  const char* reason;
};

class HttpFramingTest : public HttpProbeTest, public ::testing::WithParamInterface<FramingCase> {};

TEST_P(HttpFramingTest, TakesWhatClientsTakeAndRefusesAmbiguousFraming) {
  const FramingCase& c = GetParam();
  KeepAliveServer server("raw", c.response);
  HttpOptions o = Options();  // 10 requests per mode
  ASSERT_TRUE(RunRound(o, server.port()));
  if (*c.reason == '\0') {
    EXPECT_EQ(Requests(server.port(), "keepalive", "200"), 10) << c.name;
    EXPECT_EQ(Requests(server.port(), "new", "200"), 10) << c.name;
    EXPECT_LE(Requests(server.port(), "keepalive", "error"), 0) << c.name;
    EXPECT_LE(Requests(server.port(), "new", "error"), 0) << c.name;
    // Kept alive like curl: the 2 connections opened before the run, then one per new request.
    EXPECT_EQ(server.connections(), 2 + 10) << c.name;
  } else {
    EXPECT_EQ(Errors(server.port(), c.reason), 20) << c.name;
    EXPECT_EQ(Requests(server.port(), "new", "error"), 10) << c.name;
    EXPECT_EQ(HistogramCount("podnet_http_request_duration_seconds", server.port(), "new"), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Framing, HttpFramingTest,
    ::testing::Values(
        // RFC 9112 6.3 rule 3: Transfer-Encoding overrides Content-Length (either order).
        FramingCase{"ChunkedWithLargerContentLength",
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 100\r\n\r\n"
                    "6\r\npodnet\r\n0\r\n\r\n",
                    ""},
        FramingCase{"ChunkedWithSmallerContentLength",
                    "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "6\r\npodnet\r\n0\r\n\r\n",
                    ""},
        // RFC 9112 2.2: a recipient MAY recognize a single LF as a line terminator.
        FramingCase{"BareLfHeaderLines", "HTTP/1.1 200 OK\nContent-Length: 6\nX-A: b\n\npodnet",
                    ""},
        FramingCase{"BareLfEndOfHeader", "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\npodnet", ""},
        FramingCase{"BareLfObsFold", "HTTP/1.1 200 OK\nX-A: a\n b\nContent-Length: 6\n\npodnet",
                    ""},
        FramingCase{"BareLfChunkLines",
                    "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n6;a=b\npodnet\r\n0\nX-T: 1\n\n",
                    ""},
        FramingCase{"BareLfHeaderChunkedWithContentLength",
                    "HTTP/1.1 200 OK\nContent-Length: 100\nTransfer-Encoding: chunked\n\n"
                    "6\npodnet\r\n0\n\n",
                    ""},
        // Already taken before, kept: identical lengths, obs-fold, chunk extensions, trailers.
        FramingCase{"IdenticalContentLengths",
                    "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nContent-Length: 6\r\n\r\npodnet", ""},
        FramingCase{"ObsFold", "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 6\r\n\r\npodnet",
                    ""},
        FramingCase{"ChunkExtensionAndTrailer",
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6;a=b\r\npodnet\r\n"
                    "0\r\nX-T: 1\r\n\r\n",
                    ""},
        // Ambiguous: clients frame these differently, or the RFC calls the framing faulty.
        FramingCase{"DifferentContentLengths",
                    "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nContent-Length: 7\r\n\r\npodnet!",
                    "ambiguous_framing"},
        FramingCase{"ChunkedNotTheOnlyCoding",
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                    "6\r\npodnet\r\n0\r\n\r\n",
                    "ambiguous_framing"},
        FramingCase{
            "ChunkedTwice",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"
            "\r\n6\r\npodnet\r\n0\r\n\r\n",
            "ambiguous_framing"},
        FramingCase{"ChunkedTwiceInOneField",
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"
                    "6\r\npodnet\r\n0\r\n\r\n",
                    "ambiguous_framing"},
        FramingCase{"CodingNotChunkedWithContentLength",
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 6\r\n\r\npodnet",
                    "ambiguous_framing"},
        FramingCase{
            "TransferEncodingInHttp10",
            "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
            "6\r\npodnet\r\n0\r\n\r\n",
            "ambiguous_framing"},
        // Still malformed (python's http.client and Go refuse them too).
        FramingCase{"BareLfAfterChunkData",
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\npodnet\n0\r\n\r\n",
                    "malformed_response"},
        FramingCase{"BareCr", "HTTP/1.1 200 OK\rContent-Length: 6\r\n\r\npodnet",
                    "malformed_response"},
        FramingCase{"NegativeContentLength", "HTTP/1.1 200 OK\r\nContent-Length: -6\r\n\r\npodnet",
                    "malformed_response"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace podnet::probes::http
