#include "exporter/net/http_client.h"

#include <sys/socket.h>

#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <sstream>
#include <utility>

#include "exporter/net/response_framing.h"
#include "exporter/wire/echo.h"
#include "podnet/version.h"

namespace podnet::net::http_client {

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
    case Failure::kAmbiguousFraming:
      return "ambiguous_framing";
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

struct HttpConnection::Reading {
  Exchange ex;
  std::function<void(const Exchange&)> done;
  bool awaiting_first_byte = true;  // no byte of the current response seen yet
  // The current response, once its header section is parsed.
  std::optional<bhttp::response<bhttp::empty_body>> header;
  BodyFraming framing = BodyFraming::kUntilClose;
  bool has_body = false;
  std::uint64_t left = 0;         // kLength: body bytes still to come
  std::uint64_t until_close = 0;  // kUntilClose: body bytes so far
  ChunkedDecoder chunked;
};

void HttpConnection::Request(bool keep_alive, Clock::time_point deadline,
                             std::function<void(const Exchange&)> done) {
  auto r = std::make_shared<Reading>();
  r->done = std::move(done);
  const std::string& req = keep_alive ? request_keepalive_ : request_close_;
  stream_.expires_at(deadline);
  buffer_.clear();
  r->ex.sent = Clock::now();
  asio::async_write(stream_, asio::buffer(req),
                    [self = shared_from_this(), r](beast::error_code ec, std::size_t n) {
                      r->ex.bytes_sent = n;
                      if (ec) {
                        self->Fail(*r, Classify(ec, false));
                        return;
                      }
                      self->Pump(r);
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

void HttpConnection::Pump(std::shared_ptr<Reading> r) {
  for (;;) {
    if (r->awaiting_first_byte && buffer_.size() > 0) {
      // The response's first bytes came with the previous (1xx) response's read, a moment ago.
      r->ex.first_byte = Clock::now();
      r->awaiting_first_byte = false;
    }
    Step step = buffer_.size() == 0 ? Step::kNeedMore : r->header ? BodyStep(*r) : HeaderStep(*r);
    if (step == Step::kFailed) return;
    if (step == Step::kDone) {
      if (Complete(*r) == Step::kDone) return;
      continue;  // an interim response was skipped: the final one follows
    }
    break;
  }
  // A plain read, so that the time to first byte is when it completes.
  stream_.async_read_some(buffer_.prepare(4096),
                          [self = shared_from_this(), r](beast::error_code ec, std::size_t n) {
                            if (r->awaiting_first_byte) {
                              r->ex.first_byte = Clock::now();
                              r->awaiting_first_byte = false;
                            }
                            if (ec == asio::error::eof && r->header && r->has_body &&
                                r->framing == BodyFraming::kUntilClose) {
                              self->Complete(*r);  // RFC 9112 6.3 rule 8: the close ends the body
                              return;
                            }
                            if (ec) {
                              self->Fail(*r, Classify(ec, r->ex.bytes_received > 0));
                              return;
                            }
                            self->buffer_.commit(n);
                            r->ex.bytes_received += n;
                            self->Pump(r);
                          });
}

HttpConnection::Step HttpConnection::HeaderStep(Reading& r) {
  std::string_view data(static_cast<const char*>(buffer_.data().data()), buffer_.size());
  auto length = HeaderLength(data.substr(0, kMaxHeaderBytes));
  if (!length) {
    if (buffer_.size() < kMaxHeaderBytes) return Step::kNeedMore;
    Fail(r, Failure::kMalformedResponse);
    return Step::kFailed;
  }
  Head head = NormalizeHead(data.substr(0, *length));
  if (head.verdict != Head::Verdict::kOk) {
    Fail(r, head.verdict == Head::Verdict::kAmbiguous ? Failure::kAmbiguousFraming
                                                      : Failure::kMalformedResponse);
    return Step::kFailed;
  }
  // Beast reads the start line and the fields; the body is framed here (skip: none expected).
  bhttp::response_parser<bhttp::empty_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(2 * kMaxHeaderBytes));  // CRLF for each LF
  parser.skip(true);
  beast::error_code ec;
  parser.put(asio::buffer(head.normalized), ec);
  if (ec || !parser.is_header_done()) {
    Fail(r, Failure::kMalformedResponse);
    return Step::kFailed;
  }
  buffer_.consume(*length);
  r.header = parser.release();
  int status = r.header->result_int();
  // RFC 9112 6.3 rule 1: 1xx, 204 and 304 responses end with their header section.
  r.has_body = !(status / 100 == 1 || status == 204 || status == 304);
  r.framing = head.framing;
  r.left = head.length;
  if (r.has_body && r.framing == BodyFraming::kLength && r.left > max_body_bytes_) {
    Fail(r, Failure::kBodyTooLarge);
    return Step::kFailed;
  }
  if (!r.has_body || (r.framing == BodyFraming::kLength && r.left == 0)) return Step::kDone;
  return buffer_.size() == 0 ? Step::kNeedMore : BodyStep(r);
}

HttpConnection::Step HttpConnection::BodyStep(Reading& r) {
  std::string_view data(static_cast<const char*>(buffer_.data().data()), buffer_.size());
  switch (r.framing) {
    case BodyFraming::kLength: {
      auto n = static_cast<std::size_t>(std::min<std::uint64_t>(r.left, data.size()));
      buffer_.consume(n);
      r.left -= n;
      return r.left == 0 ? Step::kDone : Step::kNeedMore;
    }
    case BodyFraming::kChunked: {
      std::size_t n = 0;
      auto status = r.chunked.Feed(data, &n);
      buffer_.consume(n);
      if (status == ChunkedDecoder::Status::kMalformed) {
        Fail(r, Failure::kMalformedResponse);
        return Step::kFailed;
      }
      if (r.chunked.announced() > max_body_bytes_) {
        Fail(r, Failure::kBodyTooLarge);
        return Step::kFailed;
      }
      return status == ChunkedDecoder::Status::kDone ? Step::kDone : Step::kNeedMore;
    }
    case BodyFraming::kUntilClose:
      r.until_close += data.size();
      buffer_.consume(data.size());
      if (r.until_close > max_body_bytes_) {
        Fail(r, Failure::kBodyTooLarge);
        return Step::kFailed;
      }
      return Step::kNeedMore;
  }
  return Step::kNeedMore;
}

HttpConnection::Step HttpConnection::Complete(Reading& r) {
  const auto& res = *r.header;
  int status = res.result_int();
  if (status >= 100 && status <= 199 && status != 101) {
    // Interim (103 Early Hints, 100 Continue, ...): skipped; the final response follows on the
    // same connection, within the same deadline.
    ++r.ex.interim;
    r.header.reset();
    r.chunked = {};
    r.until_close = 0;
    r.awaiting_first_byte = true;
    return Step::kNeedMore;
  }
  Exchange& ex = r.ex;
  ex.done = Clock::now();
  ex.status = status;
  // A body that the close ended leaves no connection to keep.
  ex.keep_alive = res.keep_alive() && !(r.has_body && r.framing == BodyFraming::kUntilClose);
  for (auto [name, out] : {std::pair{wire::echo::kNodeHeader, &ex.node},
                           std::pair{wire::echo::kZoneHeader, &ex.zone}}) {
    if (auto it = res.find(beast::string_view(name.data(), name.size())); it != res.end()) {
      *out = std::string(it->value());
    }
  }
  if (ex.status < 200 || ex.status > 299) ex.failure = Failure::kBadStatus;
  if (!ex.keep_alive) Close();
  r.done(ex);
  return Step::kDone;
}

void HttpConnection::Fail(Reading& r, Failure f) {
  r.ex.done = Clock::now();
  r.ex.failure = f;
  r.ex.status = 0;
  Close();
  r.done(r.ex);
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

}  // namespace podnet::net::http_client
