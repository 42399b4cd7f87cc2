#pragma once

#include <cstdint>
#include <memory>

#include "exporter/net/address.h"

namespace podnet::responders {

/// The gRPC health responder (responders.grpc): grpc.health.v1.Health (Check, Watch) as
/// libgrpc++'s default health service implements it, answering SERVING for the empty service
/// name. gRPC needs HTTP/2, which the one Beast HTTP/1.1 server does not speak, so it listens on
/// a port of its own (default 9480) and runs on gRPC's own threads, not on the probe loop.
/// Only in builds with PODNET_WITH_GRPC.
class GrpcHealthServer {
 public:
  /// Binds `listen` and starts serving. Throws std::runtime_error when it cannot bind.
  explicit GrpcHealthServer(const net::HostPort& listen);
  ~GrpcHealthServer();  // shuts down (in-flight calls get a short grace period)

  std::uint16_t port() const { return port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::uint16_t port_ = 0;
};

}  // namespace podnet::responders
