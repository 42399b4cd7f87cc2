#include "exporter/responders/grpc_health.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/support/server_interceptor.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <chrono>
#include <stdexcept>
#include <vector>

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
    if (!counted_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
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

class CountingInterceptorFactory
    : public ::grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CountingInterceptorFactory(const GrpcCounters& counters) : counters_(counters) {}
  ::grpc::experimental::Interceptor* CreateServerInterceptor(
      ::grpc::experimental::ServerRpcInfo*) override {
    return new CountingInterceptor(counters_);  // gRPC owns it (deleted with the call)
  }

 private:
  const GrpcCounters& counters_;
};

}  // namespace

struct GrpcHealthServer::Impl {
  explicit Impl(prometheus::Registry& registry) : counters(registry) {}
  GrpcCounters counters;  // before server: the server's interceptors use it until it is gone
  // Answers UNIMPLEMENTED to every other method. Also what makes this a callback server:
  // gRPC 1.51's builder refuses a server with neither a sync/callback method nor a polled
  // completion queue, and it only adds the default health service after that check.
  ::grpc::CallbackGenericService unimplemented;
  std::unique_ptr<::grpc::Server> server;
};

namespace {

// Binds and listens on `listen` with the socket options gRPC's own listener uses
// (SO_REUSEADDR; dual-stack for [::]), then closes: throws boost::system::system_error with the
// kernel's reason (EADDRINUSE, EACCES, EADDRNOTAVAIL) when the port cannot be had. gRPC reports
// a failed bind only as a null server after a page of core error lines; this says why, once.
void CheckCanListen(const net::HostPort& listen) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor probe(io);
  boost::asio::ip::tcp::endpoint ep(listen.address, listen.port);
  probe.open(ep.protocol());
  probe.set_option(boost::asio::socket_base::reuse_address(true));
  if (listen.address.is_v6()) probe.set_option(boost::asio::ip::v6_only(false));
  probe.bind(ep);
  probe.listen();
}

}  // namespace

GrpcHealthServer::GrpcHealthServer(const net::HostPort& listen, prometheus::Registry& registry)
    : impl_(std::make_unique<Impl>(registry)) {
  if (listen.port != 0) CheckCanListen(listen);
  ::grpc::EnableDefaultHealthCheckService(true);
  ::grpc::ServerBuilder builder;
  int selected = 0;
  builder.AddListeningPort(net::FormatHostPort(listen.address, listen.port),
                           ::grpc::InsecureServerCredentials(), &selected);
  // gRPC sets SO_REUSEPORT by default: a second exporter on the node would then bind the same
  // port without an error and take half of the peers' health checks. One owner per port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Bounded: small messages (health checks are a few bytes).
  builder.SetMaxReceiveMessageSize(4096);
  builder.RegisterCallbackGenericService(&impl_->unimplemented);
  std::vector<std::unique_ptr<::grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<CountingInterceptorFactory>(impl_->counters));
  builder.experimental().SetInterceptorCreators(std::move(creators));
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || selected == 0) {
    throw std::runtime_error("the gRPC server did not start (see the grpc: lines above)");
  }
  port_ = static_cast<std::uint16_t>(selected);
}

GrpcHealthServer::~GrpcHealthServer() {
  if (impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  }
}

}  // namespace podnet::responders
