#include "exporter/responders/grpc_health.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_posix.h>
#include <grpcpp/support/server_interceptor.h>
#include <prometheus/counter.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "exporter/log/last_chance.h"
#include "exporter/responders/responder_metrics.h"

namespace podnet::responders {

namespace {

// What the responder counts (responder="grpc").
struct GrpcCounters {
  explicit GrpcCounters(prometheus::Registry& registry)
      : answered(&ResponderRequests(registry).Add({{"responder", "grpc"}, {"result", "answered"}})),
        unimplemented(registry, "grpc", "ignored", "unimplemented"),
        not_found(registry, "grpc", "ignored", "not_found"),
        failed(registry, "grpc", "failed", "error") {}
  prometheus::Counter* answered;
  ResponderDrop unimplemented;  // a method other than grpc.health.v1.Health's
  ResponderDrop not_found;      // a service name the health service does not know
  ResponderDrop failed;         // any other status before an answer (e.g. a Watch cancelled)
};

// Counts each call once, on gRPC's thread: "answered" at its first response message (a Check's
// answer, a Watch's first status), else at its status, by code. Interceptors are how gRPC lets
// code outside a service see its calls (grpcpp/support/interceptor.h).
class CountingInterceptor : public ::grpc::experimental::Interceptor {
 public:
  explicit CountingInterceptor(const GrpcCounters& counters) : counters_(counters) {}
  void Intercept(::grpc::experimental::InterceptorBatchMethods* methods) override {
    using ::grpc::experimental::InterceptionHookPoints;
    if (!counted_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      counted_ = true;
      counters_.answered->Increment();
    }
    if (!counted_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      counted_ = true;
      switch (methods->GetSendStatus().error_code()) {
        case ::grpc::StatusCode::OK:  // no message, yet OK: nothing a health service sends
          counters_.answered->Increment();
          break;
        case ::grpc::StatusCode::UNIMPLEMENTED:
          counters_.unimplemented.Count();
          break;
        case ::grpc::StatusCode::NOT_FOUND:
          counters_.not_found.Count();
          break;
        default:
          counters_.failed.Count();
          break;
      }
    }
    methods->Proceed();
  }

 private:
  const GrpcCounters& counters_;
  bool counted_ = false;
};

class CountingInterceptorFactory : public ::grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CountingInterceptorFactory(const GrpcCounters& counters) : counters_(counters) {}
  ::grpc::experimental::Interceptor* CreateServerInterceptor(
      ::grpc::experimental::ServerRpcInfo*) override {
    return new CountingInterceptor(counters_);  // gRPC owns it (deleted with the call)
  }

 private:
  const GrpcCounters& counters_;
};

using boost::asio::ip::tcp;

// The kernel's 64-bit identity of the socket behind `fd` (SO_COOKIE, Linux 4.12+: unique per
// boot, never reused), or 0 when `fd` is closed or not a socket any more.
std::uint64_t SocketCookie(int fd) {
  std::uint64_t cookie = 0;
  socklen_t len = sizeof cookie;
  if (::getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0) return 0;
  return cookie;
}

}  // namespace

struct GrpcHealthServer::Impl {
  GrpcCounters counters;  // before server: the server's interceptors use it until it is gone

  // A connection handed to gRPC. gRPC owns and closes the descriptor and says nothing when it
  // does; the connection is gone when `fd` no longer names the socket with `cookie` (closed,
  // or reused for another socket).
  struct Connection {
    int fd;
    std::uint64_t cookie;
    boost::asio::ip::address source;
  };

  Impl(const net::HostPort& listen, prometheus::Registry& registry, const GrpcConnectionLimits& l)
      : counters(registry), limits(l), acceptor(io), pause(io) {
    tcp::endpoint ep(listen.address, listen.port);
    acceptor.open(ep.protocol());
    acceptor.set_option(boost::asio::socket_base::reuse_address(true));
    if (listen.address.is_v6()) acceptor.set_option(boost::asio::ip::v6_only(false));
    acceptor.bind(ep);
    acceptor.listen();
    auto& dropped = ResponderDropped(registry);
    over_limit = &dropped.Add({{"responder", "grpc"}, {"reason", "connection_limit"}});
    over_source_limit =
        &dropped.Add({{"responder", "grpc"}, {"reason", "source_connection_limit"}});
  }

  void Accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (ec == boost::asio::error::operation_aborted) return;
      if (!ec || ec == boost::asio::error::connection_aborted) {
        if (!ec) Admit(std::move(s));
        Accept();
        return;
      }
      // EMFILE, ENFILE, ENOBUFS: the connection stays in the backlog and accept would fail
      // again at once; try again in 100 ms instead of spinning.
      pause.expires_after(std::chrono::milliseconds(100));
      pause.async_wait([this](boost::system::error_code wait_ec) {
        if (!wait_ec) Accept();
      });
    });
  }

  void Admit(tcp::socket s) {
    boost::system::error_code ec;
    auto remote = s.remote_endpoint(ec);
    if (ec) return;  // already reset by the peer
    auto source = remote.address();
    if (source.is_v6() && source.to_v6().is_v4_mapped()) {
      source = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, source.to_v6());
    }
    std::lock_guard lock(mu);
    prometheus::Counter* refused = OverLimit(source);
    if (refused != nullptr) {
      refused->Increment();
      s.set_option(boost::asio::socket_base::linger(true, 0), ec);  // RST, no TIME_WAIT here
      s.close(ec);
      return;
    }
    s.set_option(tcp::no_delay(true), ec);  // as gRPC's own listener does
    s.non_blocking(true, ec);
    std::uint64_t cookie = SocketCookie(s.native_handle());
    if (ec || cookie == 0) return;
    int fd = s.release(ec);
    if (ec) return;
    connections.push_back({fd, cookie, source});
    ++per_source[source];
    ::grpc::AddInsecureChannelFromFd(server.get(), fd);
  }

  // The counter to move when `source` may not open another connection; nullptr when it may.
  // Counts are refreshed (Reap) only when a limit seems reached, at most every 10 ms, so a
  // flood of refused connections costs no more than one scan per 10 ms.
  prometheus::Counter* OverLimit(const boost::asio::ip::address& source) {
    auto over = [&]() -> prometheus::Counter* {
      if (static_cast<int>(connections.size()) >= limits.max_connections) return over_limit;
      auto it = per_source.find(source);
      if (it != per_source.end() && it->second >= limits.max_connections_per_source) {
        return over_source_limit;
      }
      return nullptr;
    };
    prometheus::Counter* refused = over();
    auto now = std::chrono::steady_clock::now();
    if (refused != nullptr && now - last_reap >= std::chrono::milliseconds(10)) {
      last_reap = now;
      Reap();
      refused = over();
    }
    return refused;
  }

  // Forgets the connections gRPC has closed. Needs mu.
  void Reap() {
    std::erase_if(connections, [&](const Connection& c) {
      if (SocketCookie(c.fd) == c.cookie) return false;
      if (--per_source[c.source] == 0) per_source.erase(c.source);
      return true;
    });
  }

  const GrpcConnectionLimits limits;
  // Answers UNIMPLEMENTED to every other method. Also what makes this a callback server:
  // gRPC 1.51's builder refuses a server with neither a sync/callback method nor a polled
  // completion queue, and it only adds the default health service after that check.
  ::grpc::CallbackGenericService unimplemented;
  std::unique_ptr<::grpc::Server> server;
  boost::asio::io_context io;
  tcp::acceptor acceptor;
  boost::asio::steady_timer pause;  // after an accept error
  std::thread thread;
  prometheus::Counter* over_limit = nullptr;
  prometheus::Counter* over_source_limit = nullptr;

  mutable std::mutex mu;  // the acceptor's thread and open_connections()
  std::vector<Connection> connections;
  std::map<boost::asio::ip::address, int> per_source;
  std::chrono::steady_clock::time_point last_reap;
};

GrpcHealthServer::GrpcHealthServer(const net::HostPort& listen, prometheus::Registry& registry,
                                   const GrpcConnectionLimits& limits)
    : impl_(std::make_unique<Impl>(listen, registry, limits)) {
  port_ = impl_->acceptor.local_endpoint().port();
  ::grpc::EnableDefaultHealthCheckService(true);
  ::grpc::ServerBuilder builder;  // no listening port: connections come from Impl::Admit
  // Bounded: small messages (health checks are a few bytes).
  builder.SetMaxReceiveMessageSize(4096);
  builder.RegisterCallbackGenericService(&impl_->unimplemented);
  std::vector<std::unique_ptr<::grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<CountingInterceptorFactory>(impl_->counters));
  builder.experimental().SetInterceptorCreators(std::move(creators));
  impl_->server = builder.BuildAndStart();
  if (!impl_->server) {
    throw std::runtime_error("the gRPC server did not start (see the grpc: lines above)");
  }
  impl_->Accept();
  impl_->thread =
      std::thread([this] { log::RunOrExit("gRPC acceptor", [this] { impl_->io.run(); }); });
}

GrpcHealthServer::~GrpcHealthServer() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  if (impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  }
}

int GrpcHealthServer::open_connections() const {
  std::lock_guard lock(impl_->mu);
  impl_->Reap();
  return static_cast<int>(impl_->connections.size());
}

}  // namespace podnet::responders
