#pragma once

#include <prometheus/registry.h>

#include <cstdint>
#include <memory>

#include "exporter/net/address.h"

namespace podnet::responders {

/// Bounds on the gRPC health responder's TCP connections. Each HTTP/2 connection gRPC keeps
/// costs about 45 kB (2,500 idle connections held 111 MB in a break test), and gRPC 1.51 has
/// no limit of its own (grpc.max_allowed_incoming_connections came later). A peer's probe keeps
/// one channel to us, so a legitimate source needs one or two connections.
struct GrpcConnectionLimits {
  int max_connections = 256;           // all sources together (≈ 12 MB at most)
  int max_connections_per_source = 8;  // one source address (IPv4-mapped IPv6 = IPv4)
};

/// The gRPC health responder (responders.grpc): grpc.health.v1.Health (Check, Watch) as
/// libgrpc++'s default health service implements it, answering SERVING for the empty service
/// name. gRPC needs HTTP/2, which the one Beast HTTP/1.1 server does not speak, so it listens on
/// a port of its own (default 9480) and runs on gRPC's own threads, not on the probe loop.
///
/// Connections are accepted by a thread of this class that does nothing else and handed to
/// gRPC (grpc::AddInsecureChannelFromFd) only within GrpcConnectionLimits; a connection over a
/// limit is reset at once (no TIME_WAIT kept here). A source over its own limit cannot lock
/// out other peers; only many sources together can fill max_connections.
/// Series: podnet_responder_dropped_total{responder="grpc",
/// reason="connection_limit"|"source_connection_limit"}.
/// Only in builds with PODNET_WITH_GRPC.
class GrpcHealthServer {
 public:
  /// Binds `listen` (an IPv6 wildcard also accepts IPv4; no SO_REUSEPORT: a taken port is an
  /// error, not a shared one) and starts serving. Throws boost::system::system_error with the
  /// kernel's reason when the address cannot be bound, std::runtime_error when gRPC does not
  /// start. Counts every call in podnet_responder_requests_total{responder="grpc", result=
  /// "answered" | "ignored" | "failed"} and, unanswered, podnet_responder_dropped_total{
  /// responder="grpc", reason="unimplemented" (another method) | "not_found" (an unknown service
  /// name) | "error"}; connections reset over `limits` count reason="source_connection_limit" |
  /// "connection_limit".
  GrpcHealthServer(const net::HostPort& listen, prometheus::Registry& registry,
                   const GrpcConnectionLimits& limits = {});
  ~GrpcHealthServer();  // stops accepting, shuts down (in-flight calls get a short grace period)

  std::uint16_t port() const { return port_; }
  /// Connections handed to gRPC that gRPC has not closed yet (for tests).
  int open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::uint16_t port_ = 0;
};

}  // namespace podnet::responders
