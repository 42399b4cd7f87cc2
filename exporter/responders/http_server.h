#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/io_context.hpp>

#include "exporter/net/address.h"

namespace podnet::responders {

/// A request as the router sees it.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, as sent
  std::string body;
  bool accepts_gzip = false;  // Accept-Encoding names gzip (or x-gzip) with a q-value above 0
};

struct HttpResponse {
  HttpResponse() = default;
  HttpResponse(int status, std::string content_type, std::string body,
               std::string content_encoding = {})
      : status(status),
        content_type(std::move(content_type)),
        body(std::move(body)),
        content_encoding(std::move(content_encoding)) {}

  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  /// The coding the handler already applied to `body` ("gzip"), sent as Content-Encoding with
  /// Vary: Accept-Encoding; empty: none. The server never encodes a body itself.
  std::string content_encoding;
};

/// Whether an Accept-Encoding field value (RFC 9110 §12.5.3) accepts gzip: "gzip" or "x-gzip"
/// listed with no q-value or q > 0 ("gzip;q=0" refuses it). "*" is not taken as gzip.
bool AcceptsGzip(std::string_view accept_encoding);

/// Answers a request on the server's loop.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

/// Completes one request: call it exactly once, from any thread; the response is written back on
/// the server's loop (the connection waits for it, holding no thread).
using HttpRespond = std::function<void(HttpResponse)>;

/// Takes a request on the server's loop and completes it through `respond`, at once or later
/// from another thread — how work that must not run on the server's loop (a /metrics body, a
/// reload) is done elsewhere on the same port (runtime/loop_role.h).
using AsyncHttpHandler = std::function<void(HttpRequest, HttpRespond)>;

/// Limits that keep one port safe to expose to every Pod of a cluster.
struct HttpLimits {
  int max_connections = 128;  // at the limit a new one replaces the oldest idle; else waits
  std::size_t max_header_bytes = 8192;
  std::size_t max_body_bytes = 65536;
  int idle_timeout_seconds = 30;   // a keep-alive connection may wait this for its next request
  int request_timeout_seconds = 10;  // a whole request must arrive within this (from its first
                                     // byte; slow byte-at-a-time clients are cut off)
};

/// The one HTTP/1.1 server of the exporter (Boost.Beast): /metrics, health, reload, /echo and
/// /podnet/info share one port (docs/design.md, "One HTTP port"). Keep-alive is honoured; oversized
/// or malformed requests get 400/413 and the connection is closed; every read has a deadline.
class HttpServer {
 public:
  /// Binds and listens on `listen`. Throws boost::system::system_error when it cannot bind.
  HttpServer(boost::asio::io_context& io, const net::HostPort& listen, HttpHandler handler,
             HttpLimits limits = {});
  /// The same with a handler that may complete requests from another thread.
  HttpServer(boost::asio::io_context& io, const net::HostPort& listen, AsyncHttpHandler handler,
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
