#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exporter/net/address.h"

namespace prometheus {
class Registry;
}
namespace boost::asio::ssl {
class context;
}

namespace podnet::responders {

/// A request as the router sees it.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...; a HEAD request reaches the handler as "GET" (the
                       // server sends the answer's header and Content-Length, not its body)
  std::string target;  // origin form: path and query; an absolute-form target
                       // ("http://host:port/metrics", RFC 9112 §3.2.2) arrives as its path
  std::string body;
  bool accepts_gzip = false;        // Accept-Encoding names gzip (or x-gzip) with a q-value above 0
  bool accepts_protobuf = false;    // Accept prefers Prometheus' protobuf format (AcceptsProtobuf)
  bool tls = false;                 // it came over TLS (HttpServer::EnableTls)
  std::string authorization;        // the Authorization header field's value, "" when absent
  boost::asio::ip::address remote;  // the client's address, as the socket gives it
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
  /// When set, the body instead of `body`: one text several responses share (one /metrics
  /// body for scrapes that came together), held until the last of them is written.
  std::shared_ptr<const std::string> shared_body;
  /// The handler chose the body's format by the request's Accept (/metrics): Vary names it.
  bool varies_by_accept = false;
  /// Further header fields (Retry-After, ...), sent as given after the server's own.
  std::vector<std::pair<std::string, std::string>> headers;
};

/// Whether an Accept-Encoding field value (RFC 9110 §12.5.3) accepts gzip: "gzip" or "x-gzip"
/// listed with no q-value or q > 0 ("gzip;q=0" refuses it). "*" is not taken as gzip.
bool AcceptsGzip(std::string_view accept_encoding);

/// Whether an Accept field value (RFC 9110 §12.5.1) asks for Prometheus' protobuf exposition
/// format rather than the text one: `application/vnd.google.protobuf` with the parameters
/// `proto=io.prometheus.client.MetricFamily` and `encoding=delimited` listed with q > 0 and a
/// q-value at least that of every range the text format matches (text/plain, text/*, */*).
/// Anything else, a malformed value or an empty one included, is the text format.
bool AcceptsProtobuf(std::string_view accept);

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
  /// At the limit a new connection takes the place of the oldest idle one (else the oldest
  /// slow request, below) of its own source or of a source that holds more connections than
  /// its own; with none, one from a source that holds none, or that another source out-holds,
  /// waits for the next room (at most 64 wait; sources that hold some take at most 32 of those
  /// places, 4 each), and any other is closed at once ("connection_limit").
  int max_connections = 128;
  /// One client address holds at most this many: at it, a new connection takes the place of
  /// that source's own oldest idle (or slow) one, else it is closed ("source_connection_limit").
  /// A peer's HTTP probe holds `connections` (4) of them, Prometheus and the kubelet one or two.
  int max_connections_per_source = 16;
  std::size_t max_header_bytes = 8192;
  std::size_t max_body_bytes = 65536;
  int idle_timeout_seconds = 30;     // a keep-alive connection may wait this for its next request
  int request_timeout_seconds = 10;  // a whole request must arrive within this (from its first
                                     // byte; slow byte-at-a-time clients are cut off), and a
                                     // whole response must be taken by the client within this
  /// At the connection limit with no idle connection to close, a request still arriving after
  /// this long is cut to make room (slowloris): a real client sends its request in one round
  /// trip, so a liveness probe gets a connection within about this time however many clients
  /// trickle headers. Younger requests are never cut.
  int slow_request_grace_ms = 1000;
  /// Response bytes held for all connections together while clients take them. A response
  /// that would pass it is replaced by 503 with Retry-After (a response on its own larger than
  /// this is still sent when nothing else is held). Bounds memory against clients that ask
  /// for /metrics and never read.
  std::size_t max_buffered_response_bytes = 48u << 20;
};

/// The one HTTP/1.1 server of the exporter (Boost.Beast): /metrics, health, reload, /echo and
/// /podnet/info share one port (docs/design.md, "One HTTP port"). Keep-alive is honoured;
/// oversized or malformed requests get 400/413/431 and the connection is closed; every read and
/// write has a deadline. RFC 9112/9110 conformance: an HTTP/1.1 request without exactly one
/// Host field is 400 (§3.2); absolute-form targets are accepted (§3.2.2); HEAD gets GET's
/// header without the body (RFC 9110 §9.3.2); `Expect: 100-continue` is answered with
/// 100 Continue before the body is read, or with 413 when the announced body is too large, and
/// any other expectation with 417 (RFC 9110 §10.1.1).
///
/// Series (with a registry): podnet_responder_dropped_total{responder="http", reason=
/// "malformed" (400/413/417/431) | "slow_request" (cut at the limit, or past its deadline) |
/// "response_budget" (503: max_buffered_response_bytes held) | "tls_handshake" (a TLS connection
/// whose handshake failed) | "connection_limit" (closed at once: max_connections held, nothing
/// it may take the place of) | "source_connection_limit" (closed at once:
/// max_connections_per_source held by its address)}.
class HttpServer {
 public:
  /// Binds and listens on `listen`. Throws boost::system::system_error when it cannot bind.
  /// `registry`, when given, receives the drop counters (it must outlive the server).
  HttpServer(boost::asio::io_context& io, const net::HostPort& listen, HttpHandler handler,
             HttpLimits limits = {}, prometheus::Registry* registry = nullptr);
  /// The same with a handler that may complete requests from another thread.
  HttpServer(boost::asio::io_context& io, const net::HostPort& listen, AsyncHttpHandler handler,
             HttpLimits limits = {}, prometheus::Registry* registry = nullptr);
  ~HttpServer();

  std::uint16_t port() const;
  /// Connections open now (for tests and the landing page).
  int open_connections() const;
  /// Turns TLS on, before the server's loop runs: a connection whose first byte is a TLS
  /// handshake record is served over TLS with the context `context` returns at that moment (so
  /// a re-read certificate serves new connections); any other connection stays plain HTTP, and
  /// its requests say so (HttpRequest::tls) for the handler to refuse what needs TLS. A failed
  /// handshake closes the connection (reason "tls_handshake").
  void EnableTls(std::function<std::shared_ptr<boost::asio::ssl::context>()> context);
  /// Header fields added to every response (the web configuration's), before the loop runs.
  void SetResponseHeaders(std::vector<std::pair<std::string, std::string>> headers);
  /// Response bytes held now for clients to take (see HttpLimits::max_buffered_response_bytes).
  std::size_t buffered_response_bytes() const;

  class Impl;  // opaque; public so that the connection sessions in the .cc can name it

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace podnet::responders
