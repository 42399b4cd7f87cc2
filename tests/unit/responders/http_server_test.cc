#include "exporter/responders/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <cctype>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/testing/loop.h"

namespace podnet::responders {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using podnet::testing::Eventually;
using podnet::testing::LoopThread;
using podnet::testing::TimeScale;

// ---------------------------------------------------------------------------------------------
// A blocking HTTP/1.1 client on a plain socket. Every read has a deadline.

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

class Conn {
 public:
  // `receive_buffer`: SO_RCVBUF in bytes before connecting (0: the kernel's default).
  // `source`: the loopback address to connect from (the server counts connections per source).
  explicit Conn(std::uint16_t port, int receive_buffer = 0, const char* source = "127.0.0.1") {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (receive_buffer > 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    }
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, source, &from.sin_addr);
    bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // A connection the server has not accepted yet still completes: the kernel's backlog.
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Conn() { Close(); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  bool connected() const { return connected_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  bool Send(const std::string& data) {
    std::size_t done = 0;
    while (done < data.size()) {
      ssize_t n = send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
    }
    return true;
  }

  // The next response, or std::nullopt when the connection ends or `timeout` passes first.
  // With `head`, the response to a HEAD request: Content-Length is read, no body.
  // Sends `request` and reads its response: std::nullopt when the send fails or no whole
  // response comes within `timeout`.
  std::optional<Response> RoundTrip(const std::string& request,
                                    std::chrono::milliseconds timeout = 2000ms) {
    if (!Send(request)) return std::nullopt;
    return Read(timeout);
  }

  std::optional<Response> Read(std::chrono::milliseconds timeout = 2000ms,
                               bool head_request = false) {
    auto deadline = Clock::now() + timeout;
    std::size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline)) return std::nullopt;
    }
    Response r;
    std::string head = buffer_.substr(0, header_end);
    std::size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12) return std::nullopt;
    r.status = std::stoi(status_line.substr(9, 3));
    std::size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      std::size_t end = head.find("\r\n", pos);
      if (end == std::string::npos) end = head.size();
      std::string line = head.substr(pos, end - pos);
      std::size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return std::tolower(c); });
        std::string value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        r.headers[name] = value;
      }
      pos = end + 2;
    }
    std::size_t length = r.headers.count("content-length") && !head_request && r.status >= 200
                             ? std::stoul(r.headers["content-length"])
                             : 0;
    std::size_t body_start = header_end + 4;
    while (buffer_.size() < body_start + length) {
      if (!Fill(deadline)) return std::nullopt;
    }
    r.body = buffer_.substr(body_start, length);
    buffer_.erase(0, body_start + length);
    return r;
  }

  // Whether the server closes the connection within `timeout` (bytes it sends first are
  // skipped). A reset counts as closed.
  bool ClosedWithin(std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() < 0) return false;
      pollfd p{fd_, POLLIN, 0};
      int n = poll(&p, 1, static_cast<int>(left.count()));
      if (n == 0) return false;
      if (n < 0) continue;
      char buf[4096];
      ssize_t got = recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (got == 0) return true;
      if (got < 0 && errno != EAGAIN && errno != EINTR) return true;
    }
  }

 private:
  bool Fill(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[4096];
    ssize_t n = recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) return n < 0 && (errno == EAGAIN || errno == EINTR);
    buffer_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

std::string Get(const std::string& target, const std::string& extra_headers = "",
                const std::string& version = "HTTP/1.1") {
  return "GET " + target + " " + version + "\r\nHost: localhost\r\n" + extra_headers + "\r\n";
}

// ---------------------------------------------------------------------------------------------

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(HttpLimits limits = {}) {
    net::HostPort hp{boost::asio::ip::make_address("127.0.0.1"), 0};
    server_ = loop_.Run([&] {
      return std::make_unique<HttpServer>(
          loop_.io(), hp, [this](const HttpRequest& r) { return Handle(r); }, limits, &registry_);
    });
    port_ = server_->port();
    ASSERT_NE(port_, 0);
  }

  void TearDown() override {
    if (server_) {
      // Every client socket is closed by now; let the sessions see it and end on the loop,
      // so none is left to be destroyed with the io_context.
      EXPECT_TRUE(Eventually([&] { return OpenConnections() == 0; }, 3000ms))
          << OpenConnections() << " sessions left";
      loop_.Run([&] { server_.reset(); });
    }
    loop_.Stop();
  }

  HttpResponse Handle(const HttpRequest& r) {
    ++requests_;
    if (r.target == "/throw") throw std::runtime_error("handler bug");
    if (r.target == "/encoded") {  // as /metrics does: the handler encodes, the server labels
      HttpResponse resp{200, "text/plain", r.accepts_gzip ? "as gzip" : "as is"};
      if (r.accepts_gzip) resp.content_encoding = "gzip";
      return resp;
    }
    if (r.target == "/negotiated") {  // as /metrics does: the format by Accept, Vary says so
      HttpResponse resp{200, r.accepts_protobuf ? "application/vnd.google.protobuf" : "text/plain",
                        r.accepts_protobuf ? "as protobuf" : "as text"};
      if (r.accepts_gzip) resp.content_encoding = "gzip";
      resp.varies_by_accept = true;
      return resp;
    }
    if (r.target == "/big") return {200, "text/plain", std::string(big_bytes_, 'm')};
    if (r.method == "POST") return {201, "text/plain", "got " + std::to_string(r.body.size())};
    return {200, "text/plain; charset=utf-8", "hello " + r.method + " " + r.target};
  }

  int OpenConnections() {
    return loop_.Run([&] { return server_->open_connections(); });
  }
  double Dropped(const std::string& reason) {
    return loop_.Run([&] {
      return podnet::testing::CounterValue(registry_, "podnet_responder_dropped_total",
                                           {{"responder", "http"}, {"reason", reason}});
    });
  }

  prometheus::Registry registry_;  // declared before the loop: outlives the server
  std::size_t big_bytes_ = 16u << 20;
  LoopThread loop_;
  std::unique_ptr<HttpServer> server_;
  std::uint16_t port_ = 0;
  std::atomic<int> requests_{0};
};

TEST(AcceptsGzipTest, Table) {
  struct Case {
    const char* value;
    bool gzip;
  };
  for (const Case& c : std::vector<Case>{{"gzip", true},
                                         {"", false},
                                         {"identity", false},
                                         {"gzip, deflate, br", true},
                                         {"deflate,  GZip ;q=0.5", true},
                                         {"x-gzip", true},
                                         {"gzip;q=0", false},
                                         {"gzip; q=0.000", false},
                                         {"gzip;q=1.0", true},
                                         {"gzip;q=0.001", true},
                                         {"gzip;q=0;x=9", false},
                                         {"*", false},
                                         {"gzipper", false},
                                         {"br, gzip;q=0, deflate", false}}) {
    EXPECT_EQ(AcceptsGzip(c.value), c.gzip) << c.value;
  }
}

TEST(AcceptsProtobufTest, Table) {
  struct Case {
    const char* value;
    bool protobuf;
  };
  const std::string pb =
      "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
      "encoding=delimited";
  // What Prometheus sends: 2.42 with --enable-feature=native-histograms, and without.
  const std::string prometheus_native =
      pb +
      ",application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;"
      "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
  const std::string prometheus_plain =
      "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
      "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
  const std::string with_q = pb + ";q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.1";
  const std::string spaced =
      "text/plain; q=0.2, Application/Vnd.Google.Protobuf ; proto=\"io.prometheus.client."
      "MetricFamily\" ; encoding=DELIMITED ; q=0.5";
  for (const Case& c : std::vector<Case>{
           {pb.c_str(), true},
           {prometheus_native.c_str(), true},
           {prometheus_plain.c_str(), false},
           {with_q.c_str(), true},
           {spaced.c_str(), true},
           {"", false},
           {"*/*", false},
           {"text/plain", false},
           {"application/vnd.google.protobuf", false},  // no proto, no encoding
           {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily", false},
           {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
            "encoding=text",
            false},
           {"application/vnd.google.protobuf;proto=other.Message;encoding=delimited", false},
           {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
            "encoding=delimited;q=0",
            false},
           {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
            "encoding=delimited;q=0.5,text/plain;q=0.6",
            false},
           {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
            "encoding=delimited;q=0.5,*/*",
            false},
           {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
            "encoding=delimited;q=0.5,text/plain;q=0.5",
            true},  // a tie: the format asked for by name
           {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
            "encoding=delimited;q=2",
            false},  // malformed q-values leave the element out
           {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
            "encoding=delimited;q=0.12345",
            false},
           {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
            "encoding=delimited;q=1.001",
            false},
           {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
            "encoding=delimited;q=",
            false},
           {";;;,,,;=;q=,=", false},
       }) {
    EXPECT_EQ(AcceptsProtobuf(c.value), c.protobuf) << c.value;
  }
}

// The exporter's split (runtime/loop_role.h): a request handed to another thread holds no
// thread of the server's loop while it is worked on; other connections are answered meanwhile,
// and the late response is written back on the same keep-alive connection.
TEST(HttpServerOffloadTest, AHandedOffRequestDoesNotHoldUpOthers) {
  LoopThread loop;
  LoopThread worker;  // stands in for the control loop
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> slow_started{0};
  auto server = loop.Run([&] {
    return std::make_unique<HttpServer>(
        loop.io(), net::HostPort{boost::asio::ip::make_address("127.0.0.1"), 0},
        AsyncHttpHandler([&](HttpRequest r, HttpRespond respond) {
          if (r.target != "/slow") {
            respond({200, "text/plain", "fast"});
            return;
          }
          boost::asio::post(worker.io(), [&, respond] {
            ++slow_started;
            released.wait();  // the body is "built" until the test says so
            respond({200, "text/plain", "slow"});
          });
        }));
  });
  std::uint16_t port = server->port();
  Conn slow(port), fast(port);
  ASSERT_TRUE(slow.connected() && fast.connected());
  ASSERT_TRUE(slow.Send(Get("/slow")));
  ASSERT_TRUE(Eventually([&] { return slow_started == 1; }, 2000ms));
  for (int i = 0; i < 3; ++i) {  // answered while /slow is still being built
    auto r = fast.RoundTrip(Get("/echo"));
    ASSERT_TRUE(r.has_value()) << i;
    EXPECT_EQ(r->body, "fast");
  }
  EXPECT_FALSE(slow.Read(100ms).has_value());
  release.set_value();
  auto r = slow.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->body, "slow");
  auto again = slow.RoundTrip(Get("/echo"));  // the connection goes on (keep-alive)
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->body, "fast");
  slow.Close();
  fast.Close();
  EXPECT_TRUE(Eventually([&] { return loop.Run([&] { return server->open_connections(); }) == 0; },
                         3000ms));
  loop.Run([&] { server.reset(); });
  worker.Stop();
  loop.Stop();
}

TEST_F(HttpServerTest, ContentEncodingFromTheHandlerAndAcceptEncodingToIt) {
  Start();
  Conn c(port_);
  ASSERT_TRUE(c.connected());
  auto gz = c.RoundTrip(Get("/encoded", "Accept-Encoding: gzip\r\n"));
  ASSERT_TRUE(gz.has_value());
  EXPECT_EQ(gz->body, "as gzip");
  EXPECT_EQ(gz->headers["content-encoding"], "gzip");
  EXPECT_EQ(gz->headers["vary"], "Accept-Encoding");
  ASSERT_TRUE(c.Send(Get("/encoded", "Accept-Encoding: gzip;q=0, identity\r\n")));
  auto plain = c.Read();
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->body, "as is");
  EXPECT_EQ(plain->headers.count("content-encoding"), 0u);
  EXPECT_EQ(plain->headers.count("vary"), 0u);
  c.Close();
}

TEST_F(HttpServerTest, AcceptReachesTheHandlerAndVaryNamesIt) {
  Start();
  Conn c(port_);
  ASSERT_TRUE(c.connected());
  auto pb = c.RoundTrip(Get("/negotiated",
                            "Accept: application/vnd.google.protobuf;proto=io.prometheus.client."
                            "MetricFamily;encoding=delimited;q=0.7,text/plain;q=0.3\r\n"
                            "Accept-Encoding: gzip\r\n"));
  ASSERT_TRUE(pb.has_value());
  EXPECT_EQ(pb->body, "as protobuf");
  EXPECT_EQ(pb->headers["content-encoding"], "gzip");
  EXPECT_EQ(pb->headers["vary"], "Accept, Accept-Encoding");
  ASSERT_TRUE(c.Send(Get("/negotiated", "Accept: text/plain\r\n")));
  auto text = c.Read();
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(text->body, "as text");
  EXPECT_EQ(text->headers["vary"], "Accept");
  ASSERT_TRUE(c.Send(Get("/negotiated", "Accept: application/vnd.google.protobuf;;q=x\r\n")));
  auto bad = c.Read();
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->body, "as text");
  c.Close();
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  Start();
  Conn c(port_);
  ASSERT_TRUE(c.connected());
  for (const char* target : {"/echo", "/podnet/info", "/metrics?x=1"}) {
    auto r = c.RoundTrip(Get(target));
    ASSERT_TRUE(r.has_value()) << target;
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, std::string("hello GET ") + target);
    EXPECT_EQ(r->headers["content-type"], "text/plain; charset=utf-8");
    EXPECT_NE(r->headers["connection"], "close");
  }
  EXPECT_EQ(requests_, 3);
  EXPECT_EQ(OpenConnections(), 1);
  // Two pipelined requests in one segment get two responses in order.
  ASSERT_TRUE(c.Send(Get("/one") + Get("/two")));
  auto one = c.Read();
  auto two = c.Read();
  ASSERT_TRUE(one && two);
  EXPECT_EQ(one->body, "hello GET /one");
  EXPECT_EQ(two->body, "hello GET /two");
  c.Close();
  EXPECT_TRUE(Eventually([&] { return OpenConnections() == 0; }));
}

struct KeepAliveCase {
  std::string name;
  std::string version;
  std::string headers;
  bool closes;
};

void PrintTo(const KeepAliveCase& c, std::ostream* os) { *os << c.name; }

class HttpKeepAliveTest : public HttpServerTest,
                          public ::testing::WithParamInterface<KeepAliveCase> {};

TEST_P(HttpKeepAliveTest, HonoursTheClient) {
  const auto& c = GetParam();
  Start();
  Conn conn(port_);
  auto r = conn.RoundTrip(Get("/", c.headers, c.version));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(conn.ClosedWithin(c.closes ? 1000ms : 200ms), c.closes);
}

INSTANTIATE_TEST_SUITE_P(Table, HttpKeepAliveTest,
                         ::testing::Values(KeepAliveCase{"http11_default", "HTTP/1.1", "", false},
                                           KeepAliveCase{"http11_close", "HTTP/1.1",
                                                         "Connection: close\r\n", true},
                                           KeepAliveCase{"http10_default", "HTTP/1.0", "", true},
                                           KeepAliveCase{"http10_keep_alive", "HTTP/1.0",
                                                         "Connection: keep-alive\r\n", false}),
                         [](const auto& info) { return info.param.name; });

TEST_F(HttpServerTest, PostBodiesReachTheHandler) {
  Start();  // max_body_bytes 65536
  Conn c(port_);
  // Empty, small, and a body much larger than one read, all on one keep-alive connection.
  for (std::size_t size : {std::size_t{0}, std::size_t{1000}, std::size_t{65536}}) {
    ASSERT_TRUE(c.Send("POST /-/reload HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                       std::to_string(size) + "\r\n\r\n" + std::string(size, 'x')));
    auto r = c.Read();
    ASSERT_TRUE(r.has_value()) << size;
    EXPECT_EQ(r->status, 201);
    EXPECT_EQ(r->body, "got " + std::to_string(size));
  }
}

struct BadRequestCase {
  std::string name;
  std::string request;
  int status;  // 431 header too large (RFC 6585), 413 body too large, 400 malformed
};

void PrintTo(const BadRequestCase& c, std::ostream* os) { *os << c.name; }

class HttpBadRequestTest : public HttpServerTest,
                           public ::testing::WithParamInterface<BadRequestCase> {};

TEST_P(HttpBadRequestTest, RejectedAndClosed) {
  HttpLimits limits;
  limits.max_header_bytes = 1024;
  limits.max_body_bytes = 4096;
  Start(limits);
  Conn c(port_);
  ASSERT_TRUE(c.Send(GetParam().request));
  auto r = c.Read();
  ASSERT_TRUE(r.has_value()) << "no response before the connection ended";
  EXPECT_EQ(r->status, GetParam().status);
  EXPECT_TRUE(c.ClosedWithin(1000ms));
  EXPECT_EQ(requests_, 0) << "the handler must not see a rejected request";
  // The server goes on serving others.
  Conn next(port_);
  auto ok = next.RoundTrip(Get("/after"));
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->status, 200);
}

INSTANTIATE_TEST_SUITE_P(
    Table, HttpBadRequestTest,
    ::testing::Values(BadRequestCase{"header_larger_than_limit",
                                     "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " +
                                         std::string(4000, 'a') + "\r\n\r\n",
                                     431},
                      BadRequestCase{"many_headers_larger_than_limit",
                                     [] {
                                       std::string r = "GET / HTTP/1.1\r\nHost: x\r\n";
                                       for (int i = 0; i < 100; ++i)
                                         r += "X-H" + std::to_string(i) + ": 0123456789\r\n";
                                       return r + "\r\n";
                                     }(),
                                     431},
                      BadRequestCase{"body_larger_than_limit",
                                     "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" +
                                         std::string(5000, 'b'),
                                     413},
                      BadRequestCase{"not_http", "HELLO THERE\r\n\r\n", 400},
                      BadRequestCase{"bad_content_length",
                                     "POST / HTTP/1.1\r\nContent-Length: ten\r\n\r\n", 400}),
    [](const auto& info) { return info.param.name; });

TEST_F(HttpServerTest, HandlerExceptionIs500AndServerGoesOn) {
  Start();
  Conn c(port_);
  auto r = c.RoundTrip(Get("/throw"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 500);
  auto r2 = c.RoundTrip(Get("/fine"));
  ASSERT_TRUE(r2.has_value());
  EXPECT_EQ(r2->status, 200);
}

TEST_F(HttpServerTest, AtTheLimitANewConnectionTakesTheOldestIdleOnesPlace) {
  // Idle keep-alive (or silent) clients must not lock out a scrape or the liveness probe: at
  // the limit, the oldest connection waiting for a request is closed to make room.
  HttpLimits limits;
  limits.max_connections = 2;
  Start(limits);
  Conn a(port_), b(port_);
  for (Conn* c : {&a, &b}) {
    ASSERT_TRUE(c->RoundTrip(Get("/held")).has_value());
  }
  EXPECT_EQ(OpenConnections(), 2);
  Conn third(port_);
  auto r = third.RoundTrip(Get("/third"));
  ASSERT_TRUE(r.has_value()) << "the new connection was not served";
  EXPECT_EQ(r->body, "hello GET /third");
  // The oldest idle one (a) made room; b is still served.
  EXPECT_FALSE(a.Send(Get("/again")) && a.Read(500ms).has_value()) << "a was not closed";
  ASSERT_TRUE(b.RoundTrip(Get("/still")).has_value());
  EXPECT_TRUE(Eventually([&] { return OpenConnections() == 2; }, 2000ms)) << OpenConnections();
}

TEST_F(HttpServerTest, AtTheLimitConnectionsInARequestHoldFurtherOnes) {
  // Connections in the middle of a request are never cut to make room: a further one from an
  // address that holds none waits until one of them is answered (and so turns idle) or ends;
  // one from an address that holds some already is closed at once.
  HttpLimits limits;
  limits.max_connections = 2;
  Start(limits);
  Conn a(port_, 0, "127.0.0.2"), b(port_, 0, "127.0.0.3");
  for (Conn* c : {&a, &b}) ASSERT_TRUE(c->Send("GET /slow HTTP/1.1\r\nHost: x\r\n"));
  ASSERT_TRUE(Eventually([&] { return OpenConnections() == 2; }, 2000ms));
  Conn third(port_, 0, "127.0.0.4");
  ASSERT_TRUE(third.connected());  // the kernel's backlog completes the handshake
  ASSERT_TRUE(third.Send(Get("/third")));
  EXPECT_FALSE(third.Read(300ms).has_value()) << "a third connection was served";
  EXPECT_EQ(requests_, 0);
  Conn more(port_, 0, "127.0.0.3");
  EXPECT_TRUE(more.ClosedWithin(1000ms)) << "b's address got a second connection at the limit";
  EXPECT_EQ(Dropped("connection_limit"), 1);
  ASSERT_TRUE(a.Send("\r\n"));  // a's request completes; a is answered and turns idle
  ASSERT_TRUE(a.Read().has_value());
  auto r = third.Read(2000ms);
  ASSERT_TRUE(r.has_value()) << "the waiting connection was not served after one turned idle";
  EXPECT_EQ(r->body, "hello GET /third");
  ASSERT_TRUE(b.Send("\r\n"));  // b was mid-request throughout: it was not cut
  ASSERT_TRUE(b.Read().has_value());
}

TEST_F(HttpServerTest, OneAddressHoldsAtMostItsShareOfConnections) {
  // max_connections_per_source: a further connection takes the place of the address's own
  // oldest idle keep-alive one; while none of its connections is idle (new and silent, or in
  // a request), it is closed at once. Another address is served throughout.
  HttpLimits limits;
  limits.max_connections = 8;
  limits.max_connections_per_source = 3;
  limits.slow_request_grace_ms = 60'000;
  Start(limits);
  std::vector<std::unique_ptr<Conn>> kept;
  for (int i = 0; i < 3; ++i) {
    kept.push_back(std::make_unique<Conn>(port_, 0, "127.0.0.2"));
    ASSERT_TRUE(kept.back()->RoundTrip(Get("/kept")).has_value());  // idle now
  }
  Conn fourth(port_, 0, "127.0.0.2");
  ASSERT_TRUE(fourth.RoundTrip(Get("/fourth")).has_value()) << "its own idle one did not make room";
  EXPECT_TRUE(kept[0]->ClosedWithin(1000ms)) << "the oldest idle one was not closed";
  EXPECT_EQ(Dropped("source_connection_limit"), 0);  // closed to make room, not refused
  kept.clear();
  ASSERT_TRUE(Eventually([&] { return OpenConnections() == 1; }, 2000ms));
  std::vector<std::unique_ptr<Conn>> busy;
  for (int i = 0; i < 4; ++i) {
    busy.push_back(std::make_unique<Conn>(port_, 0, "127.0.0.2"));
    if (i % 2) busy.back()->Send("GET /slow HTTP/1.1\r\nHost: x\r\n");  // else silent
  }
  // Two fill the share with `fourth`, the third takes idle `fourth`'s place, the last is refused.
  EXPECT_TRUE(busy[3]->ClosedWithin(1000ms));
  EXPECT_EQ(Dropped("source_connection_limit"), 1);
  Conn other(port_, 0, "127.0.0.3");
  auto r = other.RoundTrip(Get("/other"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, AnAddressThatHoldsManyCannotPushOutOneThatHoldsFew) {
  // At the limit, a client's idle keep-alive connection is not the place of a connection from
  // an address that holds more: that address takes the place of its own idle ones. (Before,
  // any new connection closed the oldest idle one, the legitimate client's first.)
  HttpLimits limits;
  limits.max_connections = 4;
  Start(limits);
  Conn peer(port_, 0, "127.0.0.2");
  ASSERT_TRUE(peer.RoundTrip(Get("/first")).has_value());  // idle now, the oldest connection
  std::vector<std::unique_ptr<Conn>> flood;
  for (int i = 0; i < 12; ++i) {
    flood.push_back(std::make_unique<Conn>(port_, 0, "127.0.0.3"));
    ASSERT_TRUE(Eventually([&] { return OpenConnections() <= 4; }));
  }
  auto r = peer.RoundTrip(Get("/again"));
  ASSERT_TRUE(r.has_value()) << "the peer's keep-alive connection was closed for the flood";
  EXPECT_EQ(r->body, "hello GET /again");
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionClosed) {
  HttpLimits limits;
  limits.idle_timeout_seconds = 1;
  limits.request_timeout_seconds = 5;
  Start(limits);
  Conn c(port_);
  ASSERT_TRUE(c.RoundTrip(Get("/")).has_value());
  auto start = Clock::now();
  EXPECT_FALSE(c.ClosedWithin(500ms)) << "closed before the idle timeout";
  // Closed at the 1 s idle timeout (not before, minus slack), and within 5x it (5 s, x
  // PODNET_TEST_TIME_SCALE) so a busy neighbour cannot fail it; ClosedWithin returns at the close.
  EXPECT_TRUE(c.ClosedWithin(4500ms * TimeScale())) << "idle connection kept open";
  auto took = Clock::now() - start;
  EXPECT_GE(took, 900ms);
  EXPECT_LE(took, 5s * TimeScale());
  EXPECT_TRUE(Eventually([&] { return OpenConnections() == 0; }));
}

// Sends `request` one byte every `gap` until the server closes the connection (or it is all
// sent); returns how long the server let it go on, and whether all bytes went out.
std::pair<Clock::duration, bool> SendSlowly(Conn& c, const std::string& request,
                                            std::chrono::milliseconds gap,
                                            std::chrono::milliseconds give_up) {
  auto start = Clock::now();
  for (char ch : request) {
    if (!c.Send(std::string(1, ch))) return {Clock::now() - start, false};
    if (c.ClosedWithin(gap)) return {Clock::now() - start, false};
    if (Clock::now() - start > give_up) break;
  }
  return {Clock::now() - start, true};
}

struct SlowCase {
  std::string name;
  bool after_keepalive_request;  // the slow request is the second on its connection
};

void PrintTo(const SlowCase& c, std::ostream* os) { *os << c.name; }

class HttpSlowClientTest : public HttpServerTest, public ::testing::WithParamInterface<SlowCase> {};

TEST_P(HttpSlowClientTest, CutOffAfterRequestTimeout) {
  HttpLimits limits;
  limits.request_timeout_seconds = 1;
  limits.idle_timeout_seconds = 30;  // must not stretch the time a request may take
  Start(limits);
  Conn c(port_);
  if (GetParam().after_keepalive_request) {
    ASSERT_TRUE(c.RoundTrip(Get("/fast")).has_value());
  }
  // ~110 bytes at 100 ms each would take 11 s: longer than the bound below, so a client that is
  // never cut off sends it all (or reaches give_up) and fails.
  std::string request = Get("/slow", "X-Pad: " + std::string(60, 'p') + "\r\n");
  auto [took, all_sent] = SendSlowly(c, request, 100ms, 5000ms * TimeScale());
  EXPECT_FALSE(all_sent) << "a byte-at-a-time client was not cut off";
  // Cut at the 1 s request timeout (not before, minus slack), and within 5x it (5 s, x
  // PODNET_TEST_TIME_SCALE) so a busy neighbour cannot fail it.
  EXPECT_LE(took, 5000ms * TimeScale());
  EXPECT_GE(took, 800ms);
  EXPECT_EQ(requests_, GetParam().after_keepalive_request ? 1 : 0);
  EXPECT_TRUE(Eventually([&] { return OpenConnections() == 0; }));
}

INSTANTIATE_TEST_SUITE_P(Table, HttpSlowClientTest,
                         ::testing::Values(SlowCase{"first_request", false},
                                           SlowCase{"after_keepalive_request", true}),
                         [](const auto& info) { return info.param.name; });

TEST_F(HttpServerTest, SilentNewConnectionClosedAfterRequestTimeout) {
  HttpLimits limits;
  limits.request_timeout_seconds = 1;
  limits.idle_timeout_seconds = 30;
  Start(limits);
  Conn c(port_);
  auto start = Clock::now();
  // Closed at the 1 s request timeout (not before, minus slack), and within 5x it (5 s, x
  // PODNET_TEST_TIME_SCALE) so a busy neighbour cannot fail it; ClosedWithin returns at the close.
  EXPECT_TRUE(c.ClosedWithin(5000ms * TimeScale()));
  EXPECT_GE(Clock::now() - start, 800ms);
}

TEST_F(HttpServerTest, AtTheLimitSlowRequestsMakeRoomForALivenessProbe) {
  // Slowloris: more clients than connection slots send a request line and then trickle
  // headers. Their requests are "in progress", so the idle rule cannot make room; once one has
  // been arriving for longer than the grace, the oldest is cut for a new connection.
  HttpLimits limits;
  limits.max_connections = 4;
  limits.slow_request_grace_ms = 300;
  limits.request_timeout_seconds = 30;  // the deadline alone would hold the slots for 30 s
  Start(limits);
  std::vector<std::unique_ptr<Conn>> slow;
  for (int i = 0; i < 10; ++i) {
    slow.push_back(std::make_unique<Conn>(port_, 0, i % 2 ? "127.0.0.2" : "127.0.0.3"));
    ASSERT_TRUE(slow.back()->Send("GET /slow HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n"));
  }
  ASSERT_TRUE(Eventually([&] { return OpenConnections() == 4; }));
  // Those beyond the limit, from addresses that hold some already, were closed at once (or,
  // on a slow machine, took the place of their own address's requests past the grace).
  EXPECT_TRUE(Eventually([&] {
    return Dropped("connection_limit") + Dropped("slow_request") == 6;
  })) << Dropped("connection_limit")
      << " + " << Dropped("slow_request");
  for (int round = 0; round < 3; ++round) {  // a probe every period, as the kubelet does
    Conn probe(port_, 0, "127.0.0.4");
    auto r = probe.RoundTrip(Get("/-/healthy"), 5000ms);
    ASSERT_TRUE(r.has_value()) << "round " << round << ": the probe got no connection";
    EXPECT_EQ(r->status, 200);
    for (auto& c : slow) c->Send("X-B: 2\r\n");  // they keep trickling (some are cut by now)
  }
  EXPECT_EQ(requests_, 3) << "only the probes' requests were complete";
  // The first probe took a slow request's place; the slow clients beyond the limit had been
  // refused, so the later probes found the room that one left.
  EXPECT_GE(Dropped("slow_request"), 1);
  EXPECT_LE(OpenConnections(), 5);
  slow.clear();
}

TEST_F(HttpServerTest, AtTheLimitAnAddressHoldingOneWaitsForTheFloodsPlace) {
  // An address with a request of its own in progress (e.g. a peer's HTTP probe mid-request on
  // its keep-alive connection) opens another connection at the limit, while a second address
  // out-holds it with slow requests. The new one waits for the grace and takes the place of
  // one of those; before, an address that held any connection was refused at once.
  HttpLimits limits;
  limits.max_connections = 4;
  limits.slow_request_grace_ms = 300;
  limits.request_timeout_seconds = 30;
  Start(limits);
  std::vector<std::unique_ptr<Conn>> slow;
  for (int i = 0; i < 3; ++i) {
    slow.push_back(std::make_unique<Conn>(port_, 0, "127.0.0.3"));
    ASSERT_TRUE(slow.back()->Send("GET /slow HTTP/1.1\r\nHost: x\r\n"));
  }
  ASSERT_TRUE(Eventually([&] { return OpenConnections() == 3; }));
  Conn busy(port_, 0, "127.0.0.2");
  ASSERT_TRUE(busy.Send("GET /busy HTTP/1.1\r\nHost: x\r\n"));  // in progress: holds one
  ASSERT_TRUE(Eventually([&] { return OpenConnections() == 4; }));
  Conn fresh(port_, 0, "127.0.0.2");
  auto r = fresh.RoundTrip(Get("/fresh"), 5000ms);
  ASSERT_TRUE(r.has_value()) << "the address that holds one was refused (connection_limit "
                             << Dropped("connection_limit") << ")";
  EXPECT_EQ(r->body, "hello GET /fresh");
  EXPECT_EQ(Dropped("connection_limit"), 0);
  EXPECT_GE(Dropped("slow_request"), 1);  // the flood's oldest slow request made the room
  ASSERT_TRUE(busy.Send("\r\n"));
  auto rb = busy.Read(2000ms);
  ASSERT_TRUE(rb.has_value()) << "its own request in progress was cut";
  EXPECT_EQ(rb->body, "hello GET /busy");
}

TEST_F(HttpServerTest, AtTheLimitAYoungRequestIsNotCut) {
  // The other side of the grace: a request that began just now is never cut for room.
  HttpLimits limits;
  limits.max_connections = 1;
  limits.slow_request_grace_ms = 60'000;
  Start(limits);
  Conn a(port_, 0, "127.0.0.2");
  ASSERT_TRUE(a.Send("GET /a HTTP/1.1\r\nHost: x\r\n"));
  ASSERT_TRUE(Eventually([&] { return OpenConnections() == 1; }));
  Conn b(port_, 0, "127.0.0.3");
  ASSERT_TRUE(b.Send(Get("/b")));
  EXPECT_FALSE(b.Read(500ms).has_value()) << "b was served while a's request was young";
  ASSERT_TRUE(a.Send("\r\n"));
  auto ra = a.Read();
  ASSERT_TRUE(ra.has_value()) << "a was cut";
  EXPECT_EQ(ra->body, "hello GET /a");
  EXPECT_EQ(Dropped("slow_request"), 0);
}

TEST_F(HttpServerTest, ResponseBytesHeldForClientsAreBounded) {
  // Clients that ask for a big body and do not read it: the bytes held for them together stay
  // under the budget; a request that would pass it gets 503 with Retry-After, and once a
  // client takes its body, the next one is served again.
  HttpLimits limits;
  limits.max_buffered_response_bytes = 24u << 20;
  Start(limits);
  Conn a(port_, 4096);  // a small receive window: the kernel cannot take 16 MiB off our hands
  ASSERT_TRUE(a.Send(Get("/big")));
  ASSERT_TRUE(Eventually(
      [&] { return loop_.Run([&] { return server_->buffered_response_bytes(); }) == big_bytes_; }));
  Conn b(port_, 4096);
  auto rb = b.RoundTrip(Get("/big"));
  ASSERT_TRUE(rb.has_value());
  EXPECT_EQ(rb->status, 503);
  EXPECT_EQ(rb->headers["retry-after"], "1");
  EXPECT_TRUE(b.ClosedWithin(1000ms));
  EXPECT_EQ(Dropped("response_budget"), 1);
  auto ra = a.Read(10'000ms);
  ASSERT_TRUE(ra.has_value());
  EXPECT_EQ(ra->body.size(), big_bytes_);
  EXPECT_TRUE(Eventually(
      [&] { return loop_.Run([&] { return server_->buffered_response_bytes(); }) == 0; }));
  Conn c(port_);
  auto rc = c.RoundTrip(Get("/big"), 10'000ms);
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(rc->status, 200);
  EXPECT_EQ(rc->body.size(), big_bytes_);
}

TEST_F(HttpServerTest, HeadGetsGetsHeaderWithoutTheBody) {
  Start();
  Conn c(port_);
  ASSERT_TRUE(c.Send("HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto r = c.Read(2000ms, /*head=*/true);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers["content-length"], std::to_string(std::string("hello GET /x").size()));
  // Had the body been sent, it would stand where the next response's status line must be.
  auto next = c.RoundTrip(Get("/next"));
  ASSERT_TRUE(next.has_value()) << "bytes after a HEAD response";
  EXPECT_EQ(next->body, "hello GET /next");
}

TEST_F(HttpServerTest, AbsoluteFormTargetIsServedAsItsPath) {
  Start();
  Conn c(port_);
  auto r = c.RoundTrip(Get("http://localhost:9479/metrics?x=1"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->body, "hello GET /metrics?x=1");
  r = c.RoundTrip(Get("HTTP://localhost:9479"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->body, "hello GET /");
}

TEST_F(HttpServerTest, HostFieldRules) {
  Start();
  {
    Conn c(port_);  // HTTP/1.1 without Host: 400 (RFC 9112 §3.2)
    ASSERT_TRUE(c.Send("GET /x HTTP/1.1\r\n\r\n"));
    auto r = c.Read();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 400);
    EXPECT_TRUE(c.ClosedWithin(1000ms));
  }
  {
    Conn c(port_);  // two Host fields: 400
    ASSERT_TRUE(c.Send("GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"));
    auto r = c.Read();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 400);
  }
  {
    Conn c(port_);  // HTTP/1.0 may omit it
    ASSERT_TRUE(c.Send("GET /x HTTP/1.0\r\n\r\n"));
    auto r = c.Read();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_EQ(requests_, 1);
  EXPECT_EQ(Dropped("malformed"), 2);
}

TEST_F(HttpServerTest, ExpectContinueIsAnsweredBeforeTheBody) {
  HttpLimits limits;
  limits.max_body_bytes = 4096;
  Start(limits);
  {
    Conn c(port_);
    ASSERT_TRUE(
        c.Send("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
               "Expect: 100-continue\r\n\r\n"));
    auto interim = c.Read();  // curl waits for this (1 s by default) before sending the body
    ASSERT_TRUE(interim.has_value()) << "no 100 Continue";
    EXPECT_EQ(interim->status, 100);
    ASSERT_TRUE(c.Send("hello"));
    auto r = c.Read();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 201);
    EXPECT_EQ(r->body, "got 5");
  }
  {
    Conn c(port_);  // too large: the final answer at once, the body is never asked for
    ASSERT_TRUE(
        c.Send("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n"
               "Expect: 100-continue\r\n\r\n"));
    auto r = c.Read();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 413);
  }
  {
    Conn c(port_);  // an expectation the server cannot meet: 417 (RFC 9110 §10.1.1)
    ASSERT_TRUE(c.Send("GET /g HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\n\r\n"));
    auto r = c.Read();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 417);
  }
  EXPECT_EQ(requests_, 1);
}

TEST_F(HttpServerTest, BindToPortInUseThrows) {
  Start();
  net::HostPort hp{boost::asio::ip::make_address("127.0.0.1"), port_};
  EXPECT_THROW(loop_.Run([&] {
    return std::make_unique<HttpServer>(loop_.io(), hp,
                                        [](const HttpRequest&) { return HttpResponse{}; });
  }),
               boost::system::system_error);
}

}  // namespace
}  // namespace podnet::responders
