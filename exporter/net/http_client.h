#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "exporter/net/tcp_info.h"

namespace podnet::net::http_client {

using Clock = std::chrono::steady_clock;

/// Why a request got no good answer: the `reason` label of podnet_probe_errors_total{probe="http"}.
enum class Failure {
  kNone,
  kRefused,            // connect: RST (nothing listens)
  kUnreachable,        // connect: no route / host or network unreachable
  kConnectFailed,      // connect: any other error
  kTimeout,            // no response byte by the deadline (connect included)
  kSlowResponse,       // some response bytes came, but not the whole response by the deadline
  kReset,              // ECONNRESET / EPIPE while writing or reading
  kClosed,             // the server closed the connection before a complete response
  kBadStatus,          // a complete response whose status is not 2xx
  kMalformedResponse,  // not parseable as an HTTP/1.1 response (or its header is over 8 KiB)
  kAmbiguousFraming,   // the body's length is read differently by clients, or the RFC calls the
                       // framing faulty (response_framing.h: NormalizeHead)
  kBodyTooLarge,       // the response body is longer than max_body_bytes
  kIo,                 // any other socket error
};

/// The label value: "refused", "unreachable", "connect_failed", "timeout", "slow_response",
/// "reset", "closed", "bad_status", "malformed_response", "ambiguous_framing", "body_too_large",
/// "io".
const char* FailureReason(Failure f);

/// Classifies an error of connect, write or read. `got_bytes`: part of the response had arrived
/// (a timeout then is a slow response, an EOF a response cut short).
Failure Classify(const boost::system::error_code& ec, bool got_bytes);

/// Why the probe opened a new keep-alive connection in place of one it had: the `reason` label
/// of podnet_http_reconnects_total. A real client does the same (curl: the connection check
/// before reuse and "Connection died, retrying a fresh connect"; Go's net/http Transport: the
/// idle connection's background read, and the retry of a request that got nothing back).
enum class Reconnect {
  kIdleClosed,  // the peer closed (FIN or RST) the idle connection before it was reused
  kIdleData,    // bytes arrived on the idle connection that no request asked for
  kRetried,     // a request on a reused connection failed before any response byte (EOF, RST)
                // and was sent again, once, on a new connection
};
const char* ReconnectReason(Reconnect r);  // "idle_closed" | "idle_data" | "retried"

/// One request's outcome and phase times.
struct Exchange {
  Failure failure = Failure::kNone;
  int status = 0;                  // HTTP status of the final response; 0 without one
  int interim = 0;                 // 1xx responses read and skipped before it (RFC 9110 15.2)
  Clock::time_point sent{};        // just before the request was written
  Clock::time_point first_byte{};  // the first byte of the final (non-1xx) response was read
  Clock::time_point done{};        // the response was complete, or the request failed
  std::size_t bytes_sent = 0;      // TCP payload bytes: request
  std::size_t bytes_received = 0;  // TCP payload bytes: response (as far as read)
  bool keep_alive = false;         // the server keeps the connection open after this response
  /// The final response's Podnet-Node and Podnet-Zone fields (wire/echo.h: who answered), as
  /// sent; nullopt when absent (a server that does not identify itself).
  std::optional<std::string> node;
  std::optional<std::string> zone;
};

/// One HTTP/1.1 client connection (Boost.Beast) to one peer, on the probe loop. Every operation
/// has an absolute deadline; callbacks run on the loop, exactly once per operation (also after
/// Close, with the error it caused). Not thread-safe.
class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  /// `host` is the Host header value; `target` the request target ("/echo").
  HttpConnection(boost::asio::io_context& io, boost::asio::ip::tcp::endpoint peer, std::string host,
                 std::string target, std::uint64_t max_body_bytes);

  /// TCP connect (TCP_NODELAY set after it). `done(failure, connected_at)`.
  void Connect(Clock::time_point deadline, std::function<void(Failure, Clock::time_point)> done);

  /// GET target with "Connection: keep-alive" or "close"; reads one whole final response,
  /// skipping interim 1xx responses (RFC 9110 15.2: a client reads and ignores 1xx responses
  /// other than 101 before the final one; curl and Go do). The header section and the body's
  /// length are read as curl and python do (response_framing.h), the status line and fields by
  /// Beast's parser. On any failure the connection is closed.
  void Request(bool keep_alive, Clock::time_point deadline,
               std::function<void(const Exchange&)> done);

  bool is_open() const { return stream_.socket().is_open(); }

  /// Before reusing an idle keep-alive connection: whether the peer closed it meanwhile, or
  /// sent bytes nobody asked for (a non-blocking MSG_PEEK: 0 = FIN, > 0 = stray bytes, an error
  /// other than EAGAIN = RST). nullopt: usable. Such a connection must not carry a request.
  std::optional<Reconnect> CheckIdle();
  /// Closes the socket (orderly: FIN), after charging its TCP_INFO and the close's segments
  /// (net::CloseWireBytes) for TakeWireBytes.
  void Close();

  /// The connection's wire bytes (net::ConnectionWireBytes: payload plus IP + TCP headers,
  /// handshake, ACKs and FIN included) not taken before: read from TCP_INFO now when open, plus
  /// what Close charged. Not counted: segments a timeout's close (Beast closes the socket
  /// itself) leaves unread since the last take, such as the SYN retransmits of a connect that
  /// timed out.
  net::WireBytes TakeWireBytes();

 private:
  struct Reading;  // the exchange whose response is being read
  enum class Step { kNeedMore, kFailed, kDone };
  /// Reads what the buffer holds of the response, then more from the socket, to its end.
  void Pump(std::shared_ptr<Reading> r);
  Step HeaderStep(Reading& r);
  Step BodyStep(Reading& r);
  /// The response ended: the next one (after a 1xx) is read, or the exchange is done.
  Step Complete(Reading& r);
  void Fail(Reading& r, Failure f);

  boost::beast::tcp_stream stream_;
  boost::asio::ip::tcp::endpoint peer_;
  std::string host_;
  std::string target_;
  std::uint64_t max_body_bytes_;
  boost::beast::flat_buffer buffer_;
  std::string request_keepalive_;  // the request, serialized once per form
  std::string request_close_;
  net::WireMeter meter_;    // what TCP_INFO said at the last reading
  net::WireBytes pending_;  // charged, not yet taken
};

}  // namespace podnet::net::http_client
