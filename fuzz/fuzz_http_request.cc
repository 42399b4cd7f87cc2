// The HTTP server's request handling: any bytes a client sends on a connection (requests,
// pipelined requests, bodies, Expect, HEAD, absolute-form targets, garbage) get answers or a
// closed connection, never a crash, a hang or a leak. A real HttpServer on loopback, on a
// thread of its own as in the exporter; each input is one connection that sends the bytes,
// half-closes and reads until the server closes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "exporter/responders/http_server.h"

namespace {

using podnet::responders::HttpRequest;
using podnet::responders::HttpResponse;
using podnet::responders::HttpServer;

struct Server {
  Server() {
    podnet::responders::HttpLimits limits;
    limits.request_timeout_seconds = 2;
    limits.idle_timeout_seconds = 2;
    limits.max_body_bytes = 4096;
    server = std::make_unique<HttpServer>(
        io, podnet::net::HostPort{boost::asio::ip::make_address("127.0.0.1"), 0},
        [](const HttpRequest& r) {
          if (r.target == "/throw") throw std::runtime_error("handler bug");
          HttpResponse resp{200, "text/plain", r.method + " " + r.target + " " + r.body};
          if (r.accepts_gzip) resp.content_encoding = "gzip";
          if (r.target.size() % 3 == 0) resp.headers.emplace_back("X-Fuzz", "1");
          return resp;
        },
        limits);
    port = server->port();
    thread = std::thread([this] { io.run(); });
  }
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  std::unique_ptr<HttpServer> server;
  std::uint16_t port = 0;
  std::thread thread;  // runs for the fuzzer's life
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Server* s = new Server();  // never destroyed: the fuzzer exits without unwinding
  if (size > 16384) return -1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(s->port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{3, 0};  // longer than the server's 2 s deadlines: a hang shows as a slow input
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    std::size_t done = 0;
    while (done < size) {
      ssize_t n = send(fd, data + done, size - done, MSG_NOSIGNAL);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    shutdown(fd, SHUT_WR);
    char buf[65536];
    while (recv(fd, buf, sizeof buf, 0) > 0) {
    }
  }
  close(fd);
  return 0;
}
