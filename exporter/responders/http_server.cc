#include "exporter/responders/http_server.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <list>
#include <optional>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

namespace podnet::responders {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

class HttpServer::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(boost::asio::io_context& io, const net::HostPort& listen, AsyncHttpHandler handler,
       HttpLimits limits)
      : io_(io), acceptor_(io), retry_(io), handler_(std::move(handler)), limits_(limits) {
    tcp::endpoint ep(listen.address, listen.port);
    acceptor_.open(ep.protocol());
    if (listen.address.is_v6()) acceptor_.set_option(boost::asio::ip::v6_only(false));
    acceptor_.set_option(boost::asio::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(boost::asio::socket_base::max_listen_connections);
  }

  void Start() { Accept(); }
  void Stop() {
    boost::system::error_code ec;
    acceptor_.close(ec);
    retry_.cancel();
    waiting_.reset();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int open_connections() const { return open_; }

  void SessionEnded() {
    --open_;
    if (paused_ && open_ < limits_.max_connections) {
      paused_ = false;
      if (waiting_) {
        StartSession(std::move(*waiting_));
        waiting_.reset();
      }
      Accept();
    }
  }

  // Connections waiting for a request's first byte (new, or keep-alive between requests), oldest
  // first, each with the action that closes it. At the connection limit the oldest is closed to
  // make room (as nginx reuses idle keep-alive connections), so that idle or silent clients can
  // never lock out a scrape or the kubelet's liveness probe; connections in the middle of a
  // request are never cut for this.
  using IdleList = std::list<std::function<void()>>;
  IdleList::iterator AddIdle(std::function<void()> close) {
    auto it = idle_.insert(idle_.end(), std::move(close));
    if (paused_ && waiting_) {
      // A connection waits for room: the oldest idle one goes (after this call returns, as the
      // caller still has to keep the iterator); its end starts the waiting one.
      boost::asio::post(io_, [self = shared_from_this()] {
        if (self->paused_ && self->waiting_) self->EvictOldestIdle();
      });
    } else if (paused_) {  // there is room again: the next connection accepted will take it
      paused_ = false;
      Accept();
    }
    return it;
  }
  void RemoveIdle(IdleList::iterator it) { idle_.erase(it); }
  bool EvictOldestIdle() {
    if (idle_.empty()) return false;
    auto close = std::move(idle_.front());
    idle_.pop_front();
    ++evicted_;
    close();
    return true;
  }

  const AsyncHttpHandler& handler() const { return handler_; }
  const HttpLimits& limits() const { return limits_; }

 private:
  void Accept();

  boost::asio::io_context& io_;
  tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_;  // after an accept error (EMFILE, ENFILE): no busy loop
  AsyncHttpHandler handler_;
  HttpLimits limits_;
  void StartSession(tcp::socket s);

  int open_ = 0;
  bool paused_ = false;
  std::optional<tcp::socket> waiting_;  // accepted at the limit with nothing idle to close
  IdleList idle_;
  std::uint64_t evicted_ = 0;
};

bool AcceptsGzip(std::string_view value) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  auto iequals = [](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) ==
                    std::tolower(static_cast<unsigned char>(y));
           });
  };
  while (!value.empty()) {  // bounded: each round removes one element
    std::size_t comma = value.find(',');
    std::string_view element = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
    std::size_t semi = element.find(';');
    std::string_view coding = trim(element.substr(0, semi));
    if (!iequals(coding, "gzip") && !iequals(coding, "x-gzip")) continue;
    if (semi == std::string_view::npos) return true;
    std::string_view param = trim(element.substr(semi + 1));
    if (param.size() < 2 || (param[0] != 'q' && param[0] != 'Q') || param[1] != '=') return true;
    std::string_view q = param.substr(2);
    q = trim(q.substr(0, q.find(';')));
    // qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ): any non-zero digit accepts.
    return q.find_first_of("123456789") != std::string_view::npos;
  }
  return false;
}

namespace {

// Bytes of a response handed to one send(2) (see Session::Reply).
constexpr std::size_t kWriteChunkBytes = 64 * 1024;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<HttpServer::Impl> server)
      : stream_(std::move(socket)), server_(std::move(server)) {}
  ~Session() {
    MarkBusy();
    server_->SessionEnded();
  }

  void Start() { Read(); }

 private:
  void Read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_->limits().max_header_bytes));
    parser_->body_limit(server_->limits().max_body_bytes);
    header_bytes_ = 0;
    header_done_ = false;
    // Between keep-alive requests the connection may idle for idle_timeout until the next
    // request's first byte (a new connection for request_timeout); from then on the whole
    // request must arrive within request_timeout, however slowly it trickles in. While it waits
    // for that first byte, the server may close it to make room (HttpServer::Impl::AddIdle).
    if (buffer_.size() == 0) {
      stream_.expires_after(std::chrono::seconds(first_ ? server_->limits().request_timeout_seconds
                                                        : server_->limits().idle_timeout_seconds));
      MarkIdle();
      stream_.async_read_some(
          buffer_.prepare(512), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
            self->MarkBusy();
            if (ec) {  // idle timeout, evicted, or the client went away
              self->Close();
              return;
            }
            self->buffer_.commit(n);
            self->ReadRequest();
          });
      return;
    }
    ReadRequest();
  }

  void MarkIdle() {
    idle_it_ = server_->AddIdle([weak = weak_from_this()] {
      if (auto self = weak.lock()) {
        self->idle_it_.reset();  // already taken off the list
        self->stream_.cancel();  // the pending read ends with operation_aborted: Close()
      }
    });
  }
  void MarkBusy() {
    if (idle_it_) server_->RemoveIdle(*idle_it_);
    idle_it_.reset();
  }

  void ReadRequest() {
    first_ = false;
    stream_.expires_after(std::chrono::seconds(server_->limits().request_timeout_seconds));
    ReadSome();
  }

  // Piece by piece, counting the header's bytes: Beast 1.74 checks header_limit only against
  // the part of the header not parsed yet, so a header of many small fields would pass it.
  void ReadSome() {
    http::async_read_some(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t n) {
          if (!ec && !self->header_done_) {
            self->header_bytes_ += n;
            self->header_done_ = self->parser_->is_header_done();
            if (self->header_bytes_ > self->server_->limits().max_header_bytes) {
              ec = http::error::header_limit;
            }
          }
          if (ec || self->parser_->is_done()) {
            self->OnRead(ec);
            return;
          }
          self->ReadSome();
        });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == boost::asio::error::operation_aborted || ec == boost::asio::error::connection_reset) {
      Close();
      return;
    }
    if (ec) {
      // RFC 6585 §5: 431 for a header too large; RFC 9110: 413 for a body too large.
      int status = ec == http::error::header_limit ? 431 : ec == http::error::body_limit ? 413 : 400;
      Reply(HttpResponse{status, "text/plain; charset=utf-8", ec.message() + "\n"}, false, 11);
      return;
    }
    auto& req = parser_->get();
    auto accept_encoding = req[http::field::accept_encoding];
    HttpRequest r{std::string(req.method_string()), std::string(req.target()), req.body(),
                  AcceptsGzip(std::string_view(accept_encoding.data(), accept_encoding.size()))};
    // While the handler works (maybe on another thread), the session keeps itself alive and
    // `respond` holds only a weak reference: the last reference is always dropped on this loop.
    pending_self_ = shared_from_this();
    bool keep_alive = req.keep_alive();
    unsigned version = req.version();
    HttpRespond respond = [weak = weak_from_this(), ex = stream_.get_executor(), keep_alive,
                           version](HttpResponse resp) {
      boost::asio::dispatch(ex, [weak, resp = std::move(resp), keep_alive, version]() mutable {
        auto self = weak.lock();
        if (!self || !self->pending_self_) return;  // answered already
        self->pending_self_.reset();
        self->Reply(std::move(resp), keep_alive, version);
      });
    };
    try {
      server_->handler()(std::move(r), respond);
    } catch (const std::exception& e) {  // a handler bug must not take the server down
      spdlog::error("http: handler for {} failed: {}", std::string(req.target()), e.what());
      respond(HttpResponse{500, "text/plain; charset=utf-8", "internal error\n"});
    }
  }

  void Reply(HttpResponse resp, bool keep_alive, unsigned version) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(resp.status), version);
    res->set(http::field::server, "podnet-exporter");
    res->set(http::field::content_type, resp.content_type);
    if (!resp.content_encoding.empty()) {
      res->set(http::field::content_encoding, resp.content_encoding);
      res->set(http::field::vary, "Accept-Encoding");
    }
    res->keep_alive(keep_alive);
    res->body() = std::move(resp.body);
    res->prepare_payload();
    stream_.expires_after(std::chrono::seconds(server_->limits().request_timeout_seconds));
    // A /metrics body is megabytes. Written in one send(2), the kernel copies and, on loopback,
    // delivers all of it inside that call, on this loop, where a peer's echo then waits behind
    // it. In kWriteChunkBytes pieces, each completion goes back through the loop, so an echo
    // request waits for at most one piece.
    auto sr = std::make_shared<http::response_serializer<http::string_body>>(*res);
    sr->limit(kWriteChunkBytes);
    http::async_write(stream_, *sr,
                      [self = shared_from_this(), res, sr](beast::error_code ec, std::size_t) {
                        if (ec || !res->keep_alive()) {
                          self->Close();
                          return;
                        }
                        self->Read();
                      });
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{8192};
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<HttpServer::Impl> server_;
  std::shared_ptr<Session> pending_self_;  // set while the handler has the request
  std::optional<HttpServer::Impl::IdleList::iterator> idle_it_;  // while waiting, on the list
  bool first_ = true;
  std::size_t header_bytes_ = 0;  // of the request being read, while its header is
  bool header_done_ = false;
};

}  // namespace

void HttpServer::Impl::Accept() {
  // At the limit, a connection accepted takes the place of the oldest idle one; with none idle
  // (all in a request), accepting pauses until one ends (SessionEnded) or turns idle
  // (AddIdle), and the kernel's backlog holds the rest.
  if (open_ >= limits_.max_connections && idle_.empty()) {
    paused_ = true;
    return;
  }
  acceptor_.async_accept(io_, [self = shared_from_this()](beast::error_code ec, tcp::socket s) {
    if (ec == boost::asio::error::operation_aborted || !self->acceptor_.is_open()) return;
    if (ec) {
      spdlog::warn("http: accept failed: {}", ec.message());
      self->retry_.expires_after(std::chrono::milliseconds(100));
      self->retry_.async_wait([self](beast::error_code ec) {
        if (!ec) self->Accept();
      });
      return;
    }
    s.set_option(tcp::no_delay(true), ec);
    if (self->open_ >= self->limits_.max_connections && !self->EvictOldestIdle()) {
      // Everyone is in a request (they turned busy since Accept() looked): this one waits,
      // unread, until a session ends or turns idle; further ones wait in the backlog.
      self->waiting_.emplace(std::move(s));
      self->paused_ = true;
      return;
    }
    self->StartSession(std::move(s));
    self->Accept();
  });
}

void HttpServer::Impl::StartSession(tcp::socket s) {
  ++open_;
  std::make_shared<Session>(std::move(s), shared_from_this())->Start();
}

HttpServer::HttpServer(boost::asio::io_context& io, const net::HostPort& listen,
                       AsyncHttpHandler handler, HttpLimits limits)
    : impl_(std::make_shared<Impl>(io, listen, std::move(handler), limits)) {
  impl_->Start();
}

HttpServer::HttpServer(boost::asio::io_context& io, const net::HostPort& listen,
                       HttpHandler handler, HttpLimits limits)
    : HttpServer(
          io, listen,
          AsyncHttpHandler([handler = std::move(handler)](HttpRequest r, HttpRespond respond) {
            respond(handler(r));
          }),
          limits) {}

HttpServer::~HttpServer() { impl_->Stop(); }

std::uint16_t HttpServer::port() const { return impl_->port(); }
int HttpServer::open_connections() const { return impl_->open_connections(); }

}  // namespace podnet::responders
