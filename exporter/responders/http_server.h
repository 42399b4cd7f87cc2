#pragma once

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "exporter/net/address.h"

namespace podnet::responders {

/// A request as the router sees it.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, as sent
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

/// Limits that keep one port safe to expose to every Pod of a cluster.
struct HttpLimits {
  int max_connections = 128;       // further connections wait in the kernel's accept backlog
  std::size_t max_header_bytes = 8192;
  std::size_t max_body_bytes = 65536;
  int idle_timeout_seconds = 30;   // a keep-alive connection may wait this for its next request
  int request_timeout_seconds = 10;  // a whole request must arrive within this (from its first
                                     // byte; slow byte-at-a-time clients are cut off)
};

/// The one HTTP/1.1 server of the exporter (Boost.Beast): /metrics, health, reload, /echo and
/// /podnet/info share one port (DESIGN.md). Keep-alive is honoured; oversized or malformed
/// requests get 400/413 and the connection is closed; every read has a deadline.
class HttpServer {
 public:
  /// Binds and listens on `listen`. Throws boost::system::system_error when it cannot bind.
  HttpServer(boost::asio::io_context& io, const net::HostPort& listen, HttpHandler handler,
             HttpLimits limits = {});
  ~HttpServer();

  std::uint16_t port() const;
  /// Connections open now (for tests and the landing page).
  int open_connections() const;

  class Impl;  // opaque; public so that the connection sessions in the .cc can name it

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace podnet::responders
