#pragma once

#include <chrono>
#include <cstdint>

#include "exporter/config/units.h"

namespace podnet::probes::grpc {

/// probes.grpc: every `interval`, `count` grpc.health.v1.Health/Check calls `spacing` apart to
/// each peer's gRPC health responder on `port` (the same on every peer, as a DaemonSet's), over
/// one HTTP/2 channel per peer kept between rounds. A call unanswered after `timeout` fails.
struct GrpcOptions {
  config::Duration interval = std::chrono::seconds(10);
  int count = 10;
  config::Duration spacing = std::chrono::milliseconds(100);
  config::Duration timeout = std::chrono::seconds(1);
  std::uint16_t port = 9480;

  bool operator==(const GrpcOptions&) const = default;
};

}  // namespace podnet::probes::grpc
