#include "exporter/responders/grpc_health.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <chrono>
#include <stdexcept>

namespace podnet::responders {

struct GrpcHealthServer::Impl {
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

GrpcHealthServer::GrpcHealthServer(const net::HostPort& listen) : impl_(std::make_unique<Impl>()) {
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
