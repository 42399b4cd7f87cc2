#pragma once

#include <cstdint>
#include <memory>

#include <prometheus/registry.h>

#include "exporter/net/address.h"

namespace podnet::responders {

/// The gRPC health responder (responders.grpc): grpc.health.v1.Health (Check, Watch) as
/// libgrpc++'s default health service implements it, answering SERVING for the empty service
/// name. gRPC needs HTTP/2, which the one Beast HTTP/1.1 server does not speak, so it listens on
/// a port of its own (default 9480) and runs on gRPC's own threads, not on the probe loop.
/// Only in builds with PODNET_WITH_GRPC.
class GrpcHealthServer {
 public:
  /// Binds `listen` (without SO_REUSEPORT: a taken port is an error, not a shared one) and
  /// starts serving. Throws boost::system::system_error with the kernel's reason when the
  /// address cannot be bound, std::runtime_error when gRPC does not start for another reason.
  /// Counts every call in podnet_responder_requests_total{responder="grpc", result="answered" |
  /// "ignored" | "failed"} and, unanswered, podnet_responder_dropped_total{responder="grpc",
  /// reason="unimplemented" (another method) | "not_found" (an unknown service name) | "error"}.
  GrpcHealthServer(const net::HostPort& listen, prometheus::Registry& registry);
  ~GrpcHealthServer();  // shuts down (in-flight calls get a short grace period)

  std::uint16_t port() const { return port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::uint16_t port_ = 0;
};

}  // namespace podnet::responders
