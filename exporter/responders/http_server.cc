#include "exporter/responders/http_server.h"

#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <optional>

#include "exporter/net/address.h"
#include "exporter/net/source_limiter.h"
#include "exporter/responders/responder_metrics.h"

namespace podnet::responders {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;
namespace ssl = boost::asio::ssl;

namespace {

std::string_view View(beast::string_view s) { return {s.data(), s.size()}; }

// ASCII case-insensitive equality (header field values such as codings and expectations).
bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

class HttpServer::Impl : public std::enable_shared_from_this<Impl> {
 public:
  using Clock = std::chrono::steady_clock;

  Impl(boost::asio::io_context& io, const net::HostPort& listen, AsyncHttpHandler handler,
       HttpLimits limits, prometheus::Registry* registry)
      : io_(io),
        acceptor_(io),
        retry_(io),
        recheck_(io),
        handler_(std::move(handler)),
        limits_(limits) {
    tcp::endpoint ep(listen.address, listen.port);
    acceptor_.open(ep.protocol());
    if (listen.address.is_v6()) acceptor_.set_option(boost::asio::ip::v6_only(false));
    acceptor_.set_option(boost::asio::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(boost::asio::socket_base::max_listen_connections);
    if (registry) {
      auto& dropped = ResponderDropped(*registry);
      malformed_ = &dropped.Add({{"responder", "http"}, {"reason", "malformed"}});
      slow_request_ = &dropped.Add({{"responder", "http"}, {"reason", "slow_request"}});
      response_budget_ = &dropped.Add({{"responder", "http"}, {"reason", "response_budget"}});
      tls_handshake_ = &dropped.Add({{"responder", "http"}, {"reason", "tls_handshake"}});
      connection_limit_ = &dropped.Add({{"responder", "http"}, {"reason", "connection_limit"}});
      source_connection_limit_ =
          &dropped.Add({{"responder", "http"}, {"reason", "source_connection_limit"}});
    }
  }

  void Start() { Accept(); }
  void Stop() {
    boost::system::error_code ec;
    acceptor_.close(ec);
    retry_.cancel();
    recheck_.cancel();
    waiting_.clear();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int open_connections() const { return open_; }
  std::size_t buffered_response_bytes() const { return buffered_; }

  void SessionEnded(const boost::asio::ip::address& source) {
    --open_;
    Release(source);
    if (!waiting_.empty() && open_ < limits_.max_connections) {
      Waiting w = std::move(waiting_.front());
      waiting_.pop_front();
      StartSession(std::move(w.socket), w.source);
      if (!waiting_.empty()) MakeRoomForWaiting();
    }
  }

  // Connections the server may close to make room at the connection limit, each with its
  // client's address and the action that closes it, oldest first:
  //  - idle: a keep-alive connection waiting for its next request's first byte; the oldest is
  //    closed at once (as nginx reuses idle keep-alive connections), so that idle clients can
  //    never lock out a scrape or the kubelet's liveness probe;
  //  - reading: a new connection waiting for its first request (since it was accepted), or one
  //    in the middle of a request; cut only once it has been so for longer than
  //    slow_request_grace_ms (a silent or slowloris client), never one that just began: a real
  //    client sends its request within a round trip, and a connection just accepted (its
  //    request maybe not read yet) is never taken for an idle one.
  // Connections whose request is with the handler, or whose response is being written, are on
  // neither list: they end by themselves, bounded by the request timeout.
  // Room is made fairly (EvictOne): a new connection takes the place of one from its own
  // source, or from a source that holds more connections than its own does.
  struct Evictable {
    Clock::time_point since;
    boost::asio::ip::address source;
    std::function<void()> close;
  };
  using EvictList = std::list<Evictable>;
  EvictList::iterator AddIdle(const boost::asio::ip::address& source, std::function<void()> close) {
    return Add(idle_, source, std::move(close), Clock::now());
  }
  // `since`: when the request began arriving (for a new connection: when it was accepted).
  EvictList::iterator AddReading(const boost::asio::ip::address& source,
                                 std::function<void()> close, Clock::time_point since) {
    return Add(reading_, source, std::move(close), since);
  }
  void RemoveIdle(EvictList::iterator it) { idle_.erase(it); }
  void RemoveReading(EvictList::iterator it) { reading_.erase(it); }

  // Takes a budget of `bytes` for a response to be written, false when the bytes held for all
  // connections would pass max_buffered_response_bytes (one response alone always passes, and
  // so does one the server must send anyway: `always`).
  bool ReserveResponse(std::size_t bytes, bool always = false) {
    if (!always && buffered_ > 0 && buffered_ + bytes > limits_.max_buffered_response_bytes) {
      return false;
    }
    buffered_ += bytes;
    return true;
  }
  void ReleaseResponse(std::size_t bytes) { buffered_ -= bytes; }

  void CountMalformed() { Inc(malformed_); }
  void CountTlsHandshakeFailed() { Inc(tls_handshake_); }
  bool tls_enabled() const { return static_cast<bool>(tls_); }
  std::shared_ptr<ssl::context> tls_context() const { return tls_ ? tls_() : nullptr; }
  void SetTls(std::function<std::shared_ptr<ssl::context>()> tls) { tls_ = std::move(tls); }
  const std::vector<std::pair<std::string, std::string>>& response_headers() const {
    return response_headers_;
  }
  void SetResponseHeaders(std::vector<std::pair<std::string, std::string>> h) {
    response_headers_ = std::move(h);
  }
  void CountSlowRequest() { Inc(slow_request_); }
  void CountResponseBudget() { Inc(response_budget_); }

  const AsyncHttpHandler& handler() const { return handler_; }
  const HttpLimits& limits() const { return limits_; }

 private:
  static void Inc(prometheus::Counter* c) {
    if (c) c->Increment();
  }

  void Accept();
  // A connection just accepted: started, queued until room is made, or refused (closed).
  void Admit(tcp::socket s);
  void StartSession(tcp::socket s, const boost::asio::ip::address& source);

  // Connections open or waiting from `source` (an address made canonical).
  int Held(const boost::asio::ip::address& source) const {
    auto it = holders_.find(source);
    return it == holders_.end() ? 0 : it->second;
  }
  void Release(const boost::asio::ip::address& source) {
    auto it = holders_.find(source);
    if (it != holders_.end() && --it->second <= 0) holders_.erase(it);
  }
  static void Refuse(tcp::socket& s, prometheus::Counter* reason) {
    Inc(reason);
    beast::error_code ec;
    s.close(ec);
  }

  std::chrono::milliseconds grace() const {
    return std::chrono::milliseconds(limits_.slow_request_grace_ms);
  }

  EvictList::iterator Add(EvictList& list, const boost::asio::ip::address& source,
                          std::function<void()> close, Clock::time_point since) {
    auto it = list.insert(list.end(), Evictable{since, source, std::move(close)});
    RoomMayHaveBeenMade();
    return it;
  }

  // Whether a new connection from `source`, which holds `held` already, may take the place of
  // `e`: one of its own, or unless `own_only` one of a source that holds more. So a source that
  // holds many connections can never close those of a source that holds fewer, and one that
  // holds none can always take the place of one that holds several.
  bool MayEvict(const Evictable& e, const boost::asio::ip::address& source, int held,
                bool own_only) const {
    return e.source == source || (!own_only && Held(e.source) > held);
  }

  // Whether some source holds (open or waiting) more than `held` connections: then a new one
  // from a source that holds `held` may take the place of one of them, once it is idle or past
  // the grace. At most one entry per connection held, and only looked at the limit.
  bool SomeoneHoldsMore(int held) const {
    return std::any_of(holders_.begin(), holders_.end(),
                       [held](const auto& h) { return h.second > held; });
  }

  // Whether a connection from `source` may wait for room (at most kMaxWaiting to look at).
  // Whether a new connection from `source`, which holds `held` already, may wait for room.
  bool MayWait(const boost::asio::ip::address& source, int held) const {
    if (held == 0) return waiting_.size() < kMaxWaiting;
    if (waiting_.size() >= kMaxWaiting / 2 || !SomeoneHoldsMore(held)) return false;
    auto from_source = std::count_if(waiting_.begin(), waiting_.end(),
                                     [&](const Waiting& w) { return w.source == source; });
    return from_source < kMaxWaitingPerSource;
  }

  // The oldest connection a new one from `source` may take the place of: idle first, then a
  // request arriving for longer than the grace; reading_.end() when there is none.
  EvictList::iterator Victim(const boost::asio::ip::address& source, int held, bool own_only,
                             EvictList** from) {
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if (MayEvict(*it, source, held, own_only)) {
        *from = &idle_;
        return it;
      }
    }
    auto now = Clock::now();
    for (auto it = reading_.begin(); it != reading_.end() && now - it->since >= grace(); ++it) {
      if (MayEvict(*it, source, held, own_only)) {
        *from = &reading_;
        return it;
      }
    }
    return reading_.end();
  }

  // Closes one connection to make room for a new one from `source` (Victim). False when there
  // is none (yet).
  bool EvictOne(const boost::asio::ip::address& source, int held, bool own_only) {
    EvictList* from = nullptr;
    auto it = Victim(source, held, own_only, &from);
    if (!from) return false;
    auto close = std::move(it->close);
    from->erase(it);
    close();
    return true;
  }

  // A connection turned idle or began a request: if a connection waits for room, try to make
  // it (after this call returns, as the caller still has to keep its iterator).
  void RoomMayHaveBeenMade() {
    if (waiting_.empty()) return;
    boost::asio::post(io_, [self = shared_from_this()] { self->MakeRoomForWaiting(); });
  }

  // For the first waiting connection (its source held none when it came).
  void MakeRoomForWaiting() {
    if (waiting_.empty()) return;
    const auto& source = waiting_.front().source;
    if (!EvictOne(source, Held(source) - 1, false)) ArmRecheck();
    // else the evicted session's end starts the waiting one
  }

  // When the oldest request in progress the first waiting connection may take the place of
  // passes the grace, look again.
  void ArmRecheck() {
    if (waiting_.empty()) return;
    const auto& source = waiting_.front().source;
    auto first = std::find_if(reading_.begin(), reading_.end(), [&](const Evictable& e) {
      return MayEvict(e, source, Held(source) - 1, false);
    });
    if (first == reading_.end()) return;  // a session's end or a new idle one will do
    auto at = first->since + grace();
    if (recheck_armed_ && recheck_at_ <= at) return;
    recheck_armed_ = true;
    recheck_at_ = at;
    recheck_.expires_at(at);
    recheck_.async_wait([self = shared_from_this()](beast::error_code ec) {
      self->recheck_armed_ = false;
      if (!ec) self->MakeRoomForWaiting();
    });
  }

  boost::asio::io_context& io_;
  tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_;    // after an accept error (EMFILE, ENFILE): no busy loop
  boost::asio::steady_timer recheck_;  // when a request in progress passes the grace
  bool recheck_armed_ = false;
  Clock::time_point recheck_at_;
  AsyncHttpHandler handler_;
  HttpLimits limits_;

  int open_ = 0;
  // Connections open or waiting per client address (canonical: IPv4-mapped as IPv4).
  std::map<boost::asio::ip::address, int> holders_;
  // Accepted at the limit with nothing to close yet, each from a source that held none then
  // (one per source) or that another source out-held (MayWait); started in order as room is
  // made. At most kMaxWaiting: beyond, refused. 64: 32 hostile sources cannot fill it, and 64
  // sockets are little to hold.
  struct Waiting {
    tcp::socket socket;
    boost::asio::ip::address source;
  };
  static constexpr std::size_t kMaxWaiting = 64;
  // Of a source that holds some already (e.g. a node address behind which Prometheus, the
  // kubelet and a peer's probe all connect): 4 at once wait; more are refused.
  static constexpr std::ptrdiff_t kMaxWaitingPerSource = 4;
  std::deque<Waiting> waiting_;
  EvictList idle_;
  EvictList reading_;
  std::size_t buffered_ = 0;
  prometheus::Counter* malformed_ = nullptr;
  prometheus::Counter* slow_request_ = nullptr;
  prometheus::Counter* response_budget_ = nullptr;
  prometheus::Counter* tls_handshake_ = nullptr;
  prometheus::Counter* connection_limit_ = nullptr;
  prometheus::Counter* source_connection_limit_ = nullptr;
  std::function<std::shared_ptr<ssl::context>()> tls_;  // set: TLS on (HttpServer::EnableTls)
  std::vector<std::pair<std::string, std::string>> response_headers_;
};

namespace {

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The part of `list` before the first `separator` (all of it when there is none), as it is;
// `list` keeps what follows the separator. Each call shortens `list`, so a loop over it ends.
std::string_view PopItem(std::string_view& list, char separator) {
  std::size_t at = list.find(separator);
  std::string_view item = list.substr(0, at);
  list = at == std::string_view::npos ? std::string_view{} : list.substr(at + 1);
  return item;
}

// A qvalue (RFC 9110 §12.4.2) in thousandths: ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] );
// -1 when malformed.
int QValue(std::string_view q) {
  if (q.empty() || (q[0] != '0' && q[0] != '1')) return -1;
  int whole = q[0] - '0';
  if (q.size() == 1) return whole * 1000;
  if (q[1] != '.' || q.size() > 5) return -1;
  int frac = 0;
  int scale = 100;
  for (char c : q.substr(2)) {
    if (c < '0' || c > '9') return -1;
    frac += (c - '0') * scale;
    scale /= 10;
  }
  if (whole == 1 && frac != 0) return -1;
  return whole * 1000 + frac;
}

}  // namespace

bool AcceptsGzip(std::string_view value) {
  while (!value.empty()) {  // bounded: each round removes one element
    std::string_view element = PopItem(value, ',');
    std::size_t semi = element.find(';');
    std::string_view coding = TrimOws(element.substr(0, semi));
    if (!IEquals(coding, "gzip") && !IEquals(coding, "x-gzip")) continue;
    if (semi == std::string_view::npos) return true;
    std::string_view param = TrimOws(element.substr(semi + 1));
    if (param.size() < 2 || (param[0] != 'q' && param[0] != 'Q') || param[1] != '=') return true;
    std::string_view q = param.substr(2);
    q = TrimOws(q.substr(0, q.find(';')));
    // qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ): any non-zero digit accepts.
    return q.find_first_of("123456789") != std::string_view::npos;
  }
  return false;
}

bool AcceptsProtobuf(std::string_view value) {
  int protobuf_q = 0;  // thousandths; 0: not asked for
  int text_q = 0;
  while (!value.empty()) {  // bounded: each round removes one element
    std::string_view params = PopItem(value, ',');
    std::string_view type = TrimOws(PopItem(params, ';'));
    int q = 1000;
    bool proto = false;
    bool delimited = false;
    while (!params.empty()) {  // bounded: each round removes one parameter
      std::string_view param = TrimOws(PopItem(params, ';'));
      std::size_t eq = param.find('=');
      if (eq == std::string_view::npos) continue;
      std::string_view name = TrimOws(param.substr(0, eq));
      std::string_view v = TrimOws(param.substr(eq + 1));
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      if (IEquals(name, "q")) {
        q = QValue(v);
      } else if (IEquals(name, "proto")) {
        proto = v == "io.prometheus.client.MetricFamily";
      } else if (IEquals(name, "encoding")) {
        delimited = IEquals(v, "delimited");
      }
    }
    if (q < 0) continue;  // a malformed q-value: the element is left out
    if (IEquals(type, "application/vnd.google.protobuf")) {
      if (proto && delimited) protobuf_q = std::max(protobuf_q, q);
    } else if (IEquals(type, "text/plain") || IEquals(type, "text/*") || IEquals(type, "*/*")) {
      text_q = std::max(text_q, q);
    }
  }
  return protobuf_q > 0 && protobuf_q >= text_q;
}

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

// The client's address of an accepted socket, IPv4-mapped as IPv4 (unspecified when it is
// already gone).
boost::asio::ip::address RemoteAddress(const tcp::socket& s) {
  beast::error_code ec;
  auto ep = s.remote_endpoint(ec);
  return ec ? boost::asio::ip::address() : net::Unmapped(ep.address());
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

void HttpServer::Impl::Accept() {
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
    self->Admit(std::move(s));
    self->Accept();
  });
}

void HttpServer::Impl::Admit(tcp::socket s) {
  // Accepting never pauses: what cannot be served is refused at once, so that a backlog full
  // of one source's connections cannot hold a new client behind it.
  auto source = RemoteAddress(s);
  int held = Held(source);
  if (held >= limits_.max_connections_per_source) {
    // One source never holds more: its own oldest idle (or stalled) connection makes room.
    if (!EvictOne(source, held, /*own_only=*/true)) return Refuse(s, source_connection_limit_);
  } else if (open_ + static_cast<int>(waiting_.size()) >= limits_.max_connections &&
             !EvictOne(source, held, /*own_only=*/false)) {
    // Nothing to close for it yet. A source that another one out-holds waits, unread, for the
    // next room (a session's end, or one it may close: at most the grace); one that holds as
    // many as any other is refused at once, as no one's place may become its own. (A source
    // holding one keep-alive connection, e.g. a peer's HTTP probe measuring keep-alive beside
    // new connections, still gets its new one while a flood out-holds it.) Sources that hold
    // some use at most half the line, kMaxWaitingPerSource each, so that a source holding none
    // (a kubelet) finds a place unless 32 other such sources wait.
    if (!MayWait(source, held)) return Refuse(s, connection_limit_);
    ++holders_[source];
    waiting_.push_back({std::move(s), source});
    ArmRecheck();
    return;
  }
  ++holders_[source];
  StartSession(std::move(s), source);
}

void HttpServer::Impl::StartSession(tcp::socket s, const boost::asio::ip::address& source) {
  ++open_;
  std::make_shared<Session<beast::tcp_stream>>(std::move(s), source, shared_from_this())->Start();
}

HttpServer::HttpServer(boost::asio::io_context& io, const net::HostPort& listen,
                       AsyncHttpHandler handler, HttpLimits limits, prometheus::Registry* registry)
    : impl_(std::make_shared<Impl>(io, listen, std::move(handler), limits, registry)) {
  impl_->Start();
}

HttpServer::HttpServer(boost::asio::io_context& io, const net::HostPort& listen,
                       HttpHandler handler, HttpLimits limits, prometheus::Registry* registry)
    : HttpServer(io, listen,
                 AsyncHttpHandler([handler = std::move(handler)](
                                      HttpRequest r, HttpRespond respond) { respond(handler(r)); }),
                 limits, registry) {}

HttpServer::~HttpServer() { impl_->Stop(); }

std::uint16_t HttpServer::port() const { return impl_->port(); }
int HttpServer::open_connections() const { return impl_->open_connections(); }
void HttpServer::EnableTls(std::function<std::shared_ptr<boost::asio::ssl::context>()> context) {
  impl_->SetTls(std::move(context));
}
void HttpServer::SetResponseHeaders(std::vector<std::pair<std::string, std::string>> headers) {
  impl_->SetResponseHeaders(std::move(headers));
}
std::size_t HttpServer::buffered_response_bytes() const { return impl_->buffered_response_bytes(); }

}  // namespace podnet::responders
