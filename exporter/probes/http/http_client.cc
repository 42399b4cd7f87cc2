#include "exporter/probes/http/http_client.h"

#include <sys/socket.h>

#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <sstream>
#include <utility>

#include "exporter/proto/echo.h"
#include "podnet/version.h"

namespace podnet::probes::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

const char* FailureReason(Failure f) {
  switch (f) {
    case Failure::kNone:
      return "none";
    case Failure::kRefused:
      return "refused";
    case Failure::kUnreachable:
      return "unreachable";
    case Failure::kConnectFailed:
      return "connect_failed";
    case Failure::kTimeout:
      return "timeout";
    case Failure::kSlowResponse:
      return "slow_response";
    case Failure::kReset:
      return "reset";
    case Failure::kClosed:
      return "closed";
    case Failure::kBadStatus:
      return "bad_status";
    case Failure::kMalformedResponse:
      return "malformed_response";
    case Failure::kBodyTooLarge:
      return "body_too_large";
    case Failure::kIo:
      return "io";
  }
  return "io";
}

const char* ReconnectReason(Reconnect r) {
  switch (r) {
    case Reconnect::kIdleClosed:
      return "idle_closed";
    case Reconnect::kIdleData:
      return "idle_data";
    case Reconnect::kRetried:
      return "retried";
  }
  return "retried";
}

Failure Classify(const boost::system::error_code& ec, bool got_bytes) {
  if (!ec) return Failure::kNone;
  if (ec == beast::error::timeout || ec == asio::error::timed_out) {
    return got_bytes ? Failure::kSlowResponse : Failure::kTimeout;
  }
  if (ec == asio::error::connection_refused) return Failure::kRefused;
  if (ec == asio::error::host_unreachable || ec == asio::error::network_unreachable) {
    return Failure::kUnreachable;
  }
  if (ec == asio::error::connection_reset || ec == asio::error::broken_pipe) {
    return Failure::kReset;
  }
  if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
      ec == asio::error::eof) {
    return Failure::kClosed;
  }
  if (ec == bhttp::error::body_limit || ec == bhttp::error::buffer_overflow) {
    return Failure::kBodyTooLarge;
  }
  if (ec.category() == bhttp::make_error_code(bhttp::error::bad_version).category()) {
    return Failure::kMalformedResponse;  // every other parse error: bad version, bad chunk, ...
  }
  return Failure::kIo;
}

namespace {

std::string SerializeRequest(const std::string& host, const std::string& target, bool keep_alive) {
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, target, 11};
  req.set(bhttp::field::host, host);
  req.set(bhttp::field::user_agent, std::string("podnet-exporter/") + kVersion);
  req.keep_alive(keep_alive);
  std::ostringstream out;
  out << req;
  return out.str();
}

}  // namespace

HttpConnection::HttpConnection(asio::io_context& io, tcp::endpoint peer, std::string host,
                               std::string target, std::uint64_t max_body_bytes)
    : stream_(io),
      peer_(peer),
      host_(std::move(host)),
      target_(std::move(target)),
      max_body_bytes_(max_body_bytes),
      buffer_(16384) {
  request_keepalive_ = SerializeRequest(host_, target_, true);
  request_close_ = SerializeRequest(host_, target_, false);
}

void HttpConnection::Connect(Clock::time_point deadline,
                             std::function<void(Failure, Clock::time_point)> done) {
  stream_.expires_at(deadline);
  stream_.async_connect(peer_,
                        [self = shared_from_this(), done = std::move(done)](beast::error_code ec) {
                          auto now = Clock::now();
                          if (ec) {
                            self->Close();
                            done(Classify(ec, false), now);
                            return;
                          }
                          self->stream_.socket().set_option(tcp::no_delay(true), ec);
                          done(Failure::kNone, now);
                        });
}

void HttpConnection::Request(bool keep_alive, Clock::time_point deadline,
                             std::function<void(const Exchange&)> done) {
  auto ex = std::make_shared<Exchange>();
  const std::string& req = keep_alive ? request_keepalive_ : request_close_;
  stream_.expires_at(deadline);
  buffer_.clear();
  ex->sent = Clock::now();
  asio::async_write(stream_, asio::buffer(req),
                    [self = shared_from_this(), ex, done = std::move(done)](beast::error_code ec,
                                                                            std::size_t n) mutable {
                      ex->bytes_sent = n;
                      if (ec) {
                        self->Fail(ex, ec, false, done);
                        return;
                      }
                      self->ReadResponse(ex, std::move(done));
                    });
}

std::optional<Reconnect> HttpConnection::CheckIdle() {
  if (!is_open()) return Reconnect::kIdleClosed;
  char byte;
  ssize_t n = ::recv(stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return Reconnect::kIdleClosed;
  if (n > 0) return Reconnect::kIdleData;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return std::nullopt;
  return Reconnect::kIdleClosed;
}

void HttpConnection::ReadResponse(std::shared_ptr<Exchange> ex,
                                  std::function<void(const Exchange&)> done) {
  if (buffer_.size() > 0) {
    // The final response's first bytes came with the interim one's read, a moment ago.
    ex->first_byte = Clock::now();
    ReadHeader(ex, std::move(done));
    return;
  }
  // A plain read, so that the time to first byte is when it completes; the parser then takes
  // what it read from the buffer and reads the rest.
  stream_.async_read_some(buffer_.prepare(4096),
                          [self = shared_from_this(), ex, done = std::move(done)](
                              beast::error_code ec, std::size_t n) mutable {
                            ex->first_byte = Clock::now();
                            if (ec) {
                              self->Fail(ex, ec, ex->bytes_received > 0, done);
                              return;
                            }
                            self->buffer_.commit(n);
                            self->ReadHeader(ex, std::move(done));
                          });
}

void HttpConnection::ReadHeader(std::shared_ptr<Exchange> ex,
                                std::function<void(const Exchange&)> done) {
  auto parser = std::make_shared<Parser>();
  parser->header_limit(8192);
  parser->body_limit(max_body_bytes_);
  std::size_t before = ex->bytes_received;
  std::size_t buffered = buffer_.size();
  // Header first: Beast 1.74 lets a Content-Length over body_limit through when the header and
  // part of the body arrive in one read (eager parse), so it is checked here.
  bhttp::async_read_header(
      stream_, buffer_, *parser,
      [self = shared_from_this(), ex, parser, before, buffered, done = std::move(done)](
          beast::error_code ec, std::size_t n) mutable {
        // n: the header's bytes the parser consumed; on an error, what had arrived.
        ex->bytes_received = before + (ec ? std::max(buffered, n) : n);
        if (!ec && parser->content_length() && *parser->content_length() > self->max_body_bytes_) {
          ec = bhttp::error::body_limit;
        }
        if (ec) {
          self->Fail(ex, ec, true, done);
          return;
        }
        self->ReadBody(ex, parser, std::move(done));
      });
}

void HttpConnection::ReadBody(std::shared_ptr<Exchange> ex, std::shared_ptr<Parser> parser,
                              std::function<void(const Exchange&)> done) {
  std::size_t header_bytes = ex->bytes_received;
  bhttp::async_read(stream_, buffer_, *parser,
                    [self = shared_from_this(), ex, parser, header_bytes, done = std::move(done)](
                        beast::error_code ec, std::size_t n) mutable {
                      ex->bytes_received = header_bytes + n;
                      if (ec) {
                        self->Fail(ex, ec, true, done);
                        return;
                      }
                      const auto& res = parser->get();
                      int status = res.result_int();
                      if (status >= 100 && status <= 199 && status != 101) {
                        // Interim (103 Early Hints, 100 Continue, ...): skipped; the final
                        // response follows on the same connection, within the same deadline.
                        ++ex->interim;
                        self->ReadResponse(ex, std::move(done));
                        return;
                      }
                      ex->done = Clock::now();
                      ex->status = status;
                      ex->keep_alive = res.keep_alive();
                      for (auto [name, out] : {std::pair{proto::echo::kNodeHeader, &ex->node},
                                               std::pair{proto::echo::kZoneHeader, &ex->zone}}) {
                        if (auto it = res.find(beast::string_view(name.data(), name.size()));
                            it != res.end()) {
                          *out = std::string(it->value());
                        }
                      }
                      if (ex->status < 200 || ex->status > 299) ex->failure = Failure::kBadStatus;
                      if (!ex->keep_alive) self->Close();
                      done(*ex);
                    });
}

void HttpConnection::Fail(std::shared_ptr<Exchange> ex, const beast::error_code& ec, bool got_bytes,
                          const std::function<void(const Exchange&)>& done) {
  ex->done = Clock::now();
  ex->failure = Classify(ec, got_bytes);
  ex->status = 0;
  Close();
  done(*ex);
}

net::WireBytes HttpConnection::TakeWireBytes() {
  if (is_open()) {
    if (auto ti = net::ReadTcpInfo(stream_.socket().native_handle())) {
      pending_ += meter_.Charge(net::ConnectionWireBytes(*ti, peer_.address().is_v6()));
    }
  }
  return std::exchange(pending_, {});
}

void HttpConnection::Close() {
  if (is_open()) {
    if (auto ti = net::ReadTcpInfo(stream_.socket().native_handle())) {
      bool v6 = peer_.address().is_v6();
      pending_ += meter_.Charge(net::ConnectionWireBytes(*ti, v6));
      pending_ += net::CloseWireBytes(ti->state, v6);
    }
  }
  beast::error_code ec;
  stream_.socket().close(ec);
}

}  // namespace podnet::probes::http
