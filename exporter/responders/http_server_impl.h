#pragma once

// HttpServer::Impl: the listener and its admission (the connection limits, who may wait, whom
// to close to make room), which http_server.cc accepts for and each connection's session
// (http_session.cc) reports to. Internal to the responders module.

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <chrono>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exporter/net/address.h"
#include "exporter/responders/http_server.h"
#include "exporter/responders/responder_metrics.h"

namespace podnet::responders {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;
namespace ssl = boost::asio::ssl;

/// A Beast string as a std::string_view (same bytes).
inline std::string_view View(beast::string_view s) { return {s.data(), s.size()}; }

/// ASCII case-insensitive equality (header field values such as codings and expectations).
inline bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

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

/// Starts the plain session of the accepted connection `s` from `source` (its address as the
/// server counts it), which reports to `server` as it reads, idles and ends (http_session.cc).
void StartHttpSession(tcp::socket s, const boost::asio::ip::address& source,
                      std::shared_ptr<HttpServer::Impl> server);

}  // namespace podnet::responders
