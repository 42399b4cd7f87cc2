#include "exporter/responders/grpc_health.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

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

GrpcHealthServer::GrpcHealthServer(const net::HostPort& listen) : impl_(std::make_unique<Impl>()) {
  ::grpc::EnableDefaultHealthCheckService(true);
  ::grpc::ServerBuilder builder;
  int selected = 0;
  builder.AddListeningPort(net::FormatHostPort(listen.address, listen.port),
                           ::grpc::InsecureServerCredentials(), &selected);
  // Bounded: small messages (health checks are a few bytes).
  builder.SetMaxReceiveMessageSize(4096);
  builder.RegisterCallbackGenericService(&impl_->unimplemented);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || selected == 0) {
    throw std::runtime_error("gRPC: cannot listen on " +
                             net::FormatHostPort(listen.address, listen.port));
  }
  port_ = static_cast<std::uint16_t>(selected);
}

GrpcHealthServer::~GrpcHealthServer() {
  if (impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  }
}

}  // namespace podnet::responders
