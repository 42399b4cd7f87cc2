// One HTTP connection's session (plain, or TLS after a handshake record): reading requests
// within their limits, handing them to the handler, writing the responses in bounded pieces.
#include <spdlog/spdlog.h>

#include <boost/asio/dispatch.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>

#include "exporter/responders/http_server_impl.h"

namespace podnet::responders {

namespace {

// Bytes of a response handed to one send(2) (see Session::Reply).
constexpr std::size_t kWriteChunkBytes = 64 * 1024;

// The origin form of a request target (RFC 9112 §3.2): an absolute-form target
// ("http://host:port/path?q", what a client sends to a proxy, which a server must accept,
// §3.2.2) becomes "/path?q"; any other target is returned as it is.
std::string OriginForm(std::string_view target) {
  std::size_t scheme_end = target.find("://");
  if (scheme_end == std::string_view::npos || target.empty() || target.front() == '/') {
    return std::string(target);
  }
  std::string_view scheme = target.substr(0, scheme_end);
  if (!IEquals(scheme, "http") && !IEquals(scheme, "https")) return std::string(target);
  std::string_view rest = target.substr(scheme_end + 3);
  std::size_t path = rest.find_first_of("/?");
  if (path == std::string_view::npos) return "/";
  if (rest[path] == '?') return "/" + std::string(rest.substr(path));
  return std::string(rest.substr(path));
}

// One connection: plain HTTP (Stream = beast::tcp_stream), or HTTPS (beast::ssl_stream of
// one) that a plain session hands its connection to when the first byte is a TLS handshake
// record and the server has TLS on.
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

 public:
  // `remote`: the client's address as the server counts it (HttpServer::Impl::Admit).
  Session(tcp::socket socket, boost::asio::ip::address remote,
          std::shared_ptr<HttpServer::Impl> server)
      : remote_(remote), stream_(std::move(socket)), server_(std::move(server)) {}
  // The TLS session of a connection whose first bytes (`buffer`) a plain session read.
  Session(beast::tcp_stream&& plain, boost::asio::ip::address remote,
          std::shared_ptr<ssl::context> ctx, beast::flat_buffer buffer,
          std::shared_ptr<HttpServer::Impl> server)
      : remote_(remote),
        tls_ctx_(std::move(ctx)),
        stream_(std::move(plain), *tls_ctx_),
        buffer_(std::move(buffer)),
        server_(std::move(server)) {}
  ~Session() {
    MarkBusy();
    if (!handed_over_) server_->SessionEnded(remote_);
  }

  void Start() {
    if constexpr (kTls) {
      Handshake();
    } else {
      Read();
    }
  }

 private:
  using EvictIt = HttpServer::Impl::EvictList::iterator;
  using std::enable_shared_from_this<Session<Stream>>::weak_from_this;

  void Read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_->limits().max_header_bytes));
    parser_->body_limit(server_->limits().max_body_bytes);
    header_bytes_ = 0;
    header_done_ = false;
    // Between keep-alive requests the connection may idle for idle_timeout until the next
    // request's first byte (a new connection for request_timeout); from then on the whole
    // request must arrive within request_timeout, however slowly it trickles in. While a
    // keep-alive connection waits for that first byte the server may close it to make room;
    // a new connection, and one whose request is arriving, once it has been so for longer than
    // the grace (HttpServer::Impl::EvictOne).
    if (buffer_.size() == 0) {
      beast::get_lowest_layer(stream_).expires_after(
          std::chrono::seconds(first_ ? server_->limits().request_timeout_seconds
                                      : server_->limits().idle_timeout_seconds));
      if (first_) {
        reading_it_ = server_->AddReading(remote_, CloseAction(&reading_it_, true), started_);
      } else {
        idle_it_ = server_->AddIdle(remote_, CloseAction(&idle_it_, false));
      }
      stream_.async_read_some(buffer_.prepare(512), [self = this->shared_from_this()](
                                                        beast::error_code ec, std::size_t n) {
        self->MarkBusy();
        if (ec) {  // idle timeout, evicted, or the client went away
          self->Close();
          return;
        }
        self->buffer_.commit(n);
        if constexpr (!kTls) {
          // A TLS handshake record (RFC 8446 §5.1) on a TLS port.
          auto first = static_cast<const unsigned char*>(self->buffer_.data().data())[0];
          if (self->first_ && self->server_->tls_enabled() && first == 0x16) {
            self->HandOverToTls();
            return;
          }
        }
        self->ReadRequest();
      });
      return;
    }
    ReadRequest();
  }

  // What the server calls to close this connection while it sits on one of its lists.
  std::function<void()> CloseAction(std::optional<EvictIt>* on_list, bool slow_request) {
    return [weak = this->weak_from_this(), on_list, slow_request] {
      if (auto self = weak.lock()) {
        on_list->reset();  // already taken off the list
        if (slow_request) self->server_->CountSlowRequest();
        self->cut_ = true;
        beast::get_lowest_layer(self->stream_)
            .cancel();  // the pending read ends with operation_aborted: Close()
      }
    };
  }
  void HandOverToTls() {
    auto ctx = server_->tls_context();
    if (!ctx) return Close();
    handed_over_ = true;  // the TLS session counts as this connection from now on
    std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
        std::move(stream_), remote_, std::move(ctx), std::move(buffer_), server_)
        ->Start();
  }

  void Handshake() {
    beast::get_lowest_layer(stream_).expires_after(
        std::chrono::seconds(server_->limits().request_timeout_seconds));
    if constexpr (kTls) {
      stream_.async_handshake(
          ssl::stream_base::server, buffer_.data(),
          [self = this->shared_from_this()](beast::error_code ec, std::size_t used) {
            if (ec) {  // not TLS after all, no shared version or cipher, a bad client cert
              self->server_->CountTlsHandshakeFailed();
              self->Close();
              return;
            }
            self->buffer_.consume(used);
            self->Read();
          });
    }
  }

  void MarkBusy() {
    if (idle_it_) server_->RemoveIdle(*idle_it_);
    idle_it_.reset();
    if (reading_it_) server_->RemoveReading(*reading_it_);
    reading_it_.reset();
  }

  void ReadRequest() {
    auto since = first_ ? started_ : HttpServer::Impl::Clock::now();
    first_ = false;
    beast::get_lowest_layer(stream_).expires_after(
        std::chrono::seconds(server_->limits().request_timeout_seconds));
    reading_it_ = server_->AddReading(remote_, CloseAction(&reading_it_, true), since);
    ReadSome();
  }

  // Piece by piece, counting the header's bytes: Beast 1.74 checks header_limit only against
  // the part of the header not parsed yet, so a header of many small fields would pass it.
  void ReadSome() {
    http::async_read_some(stream_, buffer_, *parser_,
                          [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
                            if (!ec && !self->header_done_) {
                              self->header_bytes_ += n;
                              self->header_done_ = self->parser_->is_header_done();
                              if (self->header_bytes_ > self->server_->limits().max_header_bytes) {
                                ec = http::error::header_limit;
                              } else if (self->header_done_ && !self->parser_->is_done()) {
                                if (self->AnswerExpect())
                                  return;  // 100 Continue written; reading goes on after
                              }
                            }
                            if (ec || self->parser_->is_done()) {
                              self->OnRead(ec);
                              return;
                            }
                            self->ReadSome();
                          });
  }

  // A header asking `Expect: 100-continue` (HTTP/1.1) before sending its body gets
  // "100 Continue" here, then the body is read (RFC 9110 §10.1.1; a body over the limit was
  // refused by the parser with 413 already). True when the interim response is being written.
  bool AnswerExpect() {
    const auto& req = parser_->get();
    if (req.version() < 11 || req.count(http::field::expect) == 0) return false;
    if (!IEquals(View(req[http::field::expect]), "100-continue")) return false;  // 417 in OnRead
    auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
    http::async_write(stream_, *cont,
                      [self = this->shared_from_this(), cont](beast::error_code ec, std::size_t) {
                        if (ec) {
                          self->OnRead(ec);
                          return;
                        }
                        self->ReadSome();
                      });
    return true;
  }

  // Why a complete request cannot be served (400/417), or 0.
  int Refusal(const http::request<http::string_body>& req, std::string* why) const {
    // RFC 9112 §3.2: a server must answer 400 to an HTTP/1.1 request without a Host field
    // and to any request with more than one.
    std::size_t hosts = req.count(http::field::host);
    if (hosts > 1 || (hosts == 0 && req.version() >= 11)) {
      *why = hosts > 1 ? "more than one Host header field" : "missing Host header field";
      return 400;
    }
    // RFC 9110 §10.1.1: an expectation other than 100-continue is 417; an HTTP/1.0 client's
    // Expect is ignored.
    if (req.version() >= 11 && req.count(http::field::expect) > 0 &&
        !IEquals(View(req[http::field::expect]), "100-continue")) {
      *why = "unsupported expectation";
      return 417;
    }
    return 0;
  }

  void OnRead(beast::error_code ec) {
    bool was_reading = reading_it_.has_value();
    MarkBusy();
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == boost::asio::error::operation_aborted || ec == boost::asio::error::connection_reset) {
      // A request cut in the middle: past its deadline, or closed to make room (counted there).
      if (ec == beast::error::timeout && was_reading && !cut_) server_->CountSlowRequest();
      Close();
      return;
    }
    if (ec) {
      // RFC 6585 §5: 431 for a header too large; RFC 9110: 413 for a body too large.
      int status = ec == http::error::header_limit ? 431
                   : ec == http::error::body_limit ? 413
                                                   : 400;
      server_->CountMalformed();
      Reply(HttpResponse{status, "text/plain; charset=utf-8", ec.message() + "\n"}, false, 11,
            false);
      return;
    }
    auto& req = parser_->get();
    std::string why;
    if (int status = Refusal(req, &why)) {
      server_->CountMalformed();
      Reply(HttpResponse{status, "text/plain; charset=utf-8", why + "\n"}, false, req.version(),
            false);
      return;
    }
    auto accept_encoding = req[http::field::accept_encoding];
    bool head = req.method() == http::verb::head;
    HttpRequest r{head ? std::string("GET") : std::string(req.method_string()),
                  OriginForm(View(req.target())),
                  req.body(),
                  AcceptsGzip(View(accept_encoding)),
                  AcceptsProtobuf(View(req[http::field::accept])),
                  kTls,
                  std::string(View(req[http::field::authorization])),
                  remote_};
    // While the handler works (maybe on another thread), the session keeps itself alive and
    // `respond` holds only a weak reference: the last reference is always dropped on this loop.
    pending_self_ = this->shared_from_this();
    bool keep_alive = req.keep_alive();
    unsigned version = req.version();
    HttpRespond respond = [weak = this->weak_from_this(), ex = stream_.get_executor(), keep_alive,
                           version, head](HttpResponse resp) {
      boost::asio::dispatch(ex,
                            [weak, resp = std::move(resp), keep_alive, version, head]() mutable {
                              auto self = weak.lock();
                              if (!self || !self->pending_self_) return;  // answered already
                              self->pending_self_.reset();
                              self->Reply(std::move(resp), keep_alive, version, head);
                            });
    };
    try {
      server_->handler()(std::move(r), respond);
    } catch (const std::exception& e) {  // a handler bug must not take the server down
      spdlog::error("http: handler for {} failed: {}", std::string(req.target()), e.what());
      respond(HttpResponse{500, "text/plain; charset=utf-8", "internal error\n"});
    }
  }

  // The response's bytes held while the client takes them (HttpLimits::
  // max_buffered_response_bytes); released when the write ends, however it ends.
  class Budget {
   public:
    Budget(std::shared_ptr<HttpServer::Impl> server, std::size_t bytes)
        : server_(std::move(server)), bytes_(bytes) {}
    Budget(const Budget&) = delete;
    Budget& operator=(const Budget&) = delete;
    ~Budget() { server_->ReleaseResponse(bytes_); }

   private:
    std::shared_ptr<HttpServer::Impl> server_;
    std::size_t bytes_;
  };

  void Reply(HttpResponse resp, bool keep_alive, unsigned version, bool head) {
    std::size_t size = resp.shared_body ? resp.shared_body->size() : resp.body.size();
    if (!head && !server_->ReserveResponse(size)) {
      server_->CountResponseBudget();
      resp = HttpResponse{503, "text/plain; charset=utf-8",
                          "too many responses being sent; retry shortly\n"};
      resp.headers.emplace_back("Retry-After", "1");
      keep_alive = false;
      size = resp.body.size();
      server_->ReserveResponse(size, /*always=*/true);
    }
    auto budget = std::make_shared<Budget>(server_, head ? 0 : size);
    http::response<http::empty_body> h(static_cast<http::status>(resp.status), version);
    h.set(http::field::server, "podnet-exporter");
    h.set(http::field::content_type, resp.content_type);
    if (!resp.content_encoding.empty()) {
      h.set(http::field::content_encoding, resp.content_encoding);
      h.set(http::field::vary, "Accept-Encoding");
    }
    if (resp.varies_by_accept) {
      h.set(http::field::vary,
            resp.content_encoding.empty() ? "Accept" : "Accept, Accept-Encoding");
    }
    for (const auto& [name, value] : server_->response_headers()) h.insert(name, value);
    for (auto& [name, value] : resp.headers) h.insert(name, value);
    h.keep_alive(keep_alive);
    beast::get_lowest_layer(stream_).expires_after(
        std::chrono::seconds(server_->limits().request_timeout_seconds));
    if (head) {  // RFC 9110 §9.3.2: GET's header fields, Content-Length included; no body
      auto res = std::make_shared<http::response<http::empty_body>>(std::move(h));
      res->content_length(size);  // after keep_alive: it must not be recomputed from the body
      Write(res, res, budget);
      return;
    }
    // The body is held once, as a string of its own or shared with other responses.
    std::shared_ptr<const std::string> text =
        resp.shared_body ? std::move(resp.shared_body)
                         : std::make_shared<const std::string>(std::move(resp.body));
    auto res = std::make_shared<http::response<http::span_body<const char>>>(std::move(h.base()));
    res->body() = beast::span<const char>(text->data(), text->size());
    res->content_length(size);
    Write(res, text, budget);
  }

  // Writes `res` (its body kept alive by `keep`) and goes on with the connection.
  // A /metrics body is megabytes. Written in one send(2), the kernel copies and, on loopback,
  // delivers all of it inside that call, on this loop, where a peer's echo then waits behind
  // it. In kWriteChunkBytes pieces, each completion goes back through the loop, so an echo
  // request waits for at most one piece.
  template <class Response, class Keep>
  void Write(std::shared_ptr<Response> res, std::shared_ptr<Keep> keep,
             std::shared_ptr<Budget> budget) {
    using Serializer = http::response_serializer<typename Response::body_type>;
    auto sr = std::make_shared<Serializer>(*res);
    sr->limit(kWriteChunkBytes);
    http::async_write(
        stream_, *sr,
        [self = this->shared_from_this(), res, sr, keep, budget](
            beast::error_code ec, std::size_t) { self->AfterWrite(ec, res->keep_alive()); });
  }

  void AfterWrite(beast::error_code ec, bool keep_alive) {
    if (ec || !keep_alive) {
      Close();
      return;
    }
    Read();
  }

  void Close() {
    beast::error_code ec;
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_send, ec);
    beast::get_lowest_layer(stream_).close();
  }

  boost::asio::ip::address remote_;        // the client's
  std::shared_ptr<ssl::context> tls_ctx_;  // TLS: outlives stream_, which refers to it
  Stream stream_;
  beast::flat_buffer buffer_{8192};
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<HttpServer::Impl> server_;
  std::shared_ptr<Session> pending_self_;  // set while the handler has the request
  std::optional<EvictIt> idle_it_;         // while waiting for a request, on the server's idle list
  std::optional<EvictIt> reading_it_;      // while a request arrives, on its reading list
  bool first_ = true;
  HttpServer::Impl::Clock::time_point started_ = HttpServer::Impl::Clock::now();
  bool cut_ = false;              // closed by the server to make room
  bool handed_over_ = false;      // plain: the connection went to a TLS session
  std::size_t header_bytes_ = 0;  // of the request being read, while its header is
  bool header_done_ = false;
};

}  // namespace

void StartHttpSession(tcp::socket s, const boost::asio::ip::address& source,
                      std::shared_ptr<HttpServer::Impl> server) {
  std::make_shared<Session<beast::tcp_stream>>(std::move(s), source, std::move(server))->Start();
}

}  // namespace podnet::responders
