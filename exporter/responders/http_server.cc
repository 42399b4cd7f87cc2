#include "exporter/responders/http_server.h"

#include <spdlog/spdlog.h>

#include "exporter/responders/http_server_impl.h"

namespace podnet::responders {
namespace {

// The client's address of an accepted socket, IPv4-mapped as IPv4 (unspecified when it is
// already gone).
boost::asio::ip::address RemoteAddress(const tcp::socket& s) {
  beast::error_code ec;
  auto ep = s.remote_endpoint(ec);
  return ec ? boost::asio::ip::address() : net::Unmapped(ep.address());
}

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
  StartHttpSession(std::move(s), source, shared_from_this());
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
