#pragma once

// probes.grpc: its options, decoder and metric families (the probe: probes/grpc/).

#include <chrono>
#include <cstdint>
#include <string>

#include "exporter/config/kinds/section.h"
#include "exporter/config/units.h"

namespace podnet::config::kinds::grpc {

/// probes.grpc: every `interval`, `count` grpc.health.v1.Health/Check calls `spacing` apart to
/// each peer's gRPC health responder on `port` (the same on every peer, as a DaemonSet's), over
/// one HTTP/2 channel per peer kept between rounds. A call unanswered after `timeout` fails.
struct GrpcOptions {
  Duration interval = std::chrono::seconds(10);
  int count = 10;
  Duration spacing = std::chrono::milliseconds(100);
  Duration timeout = std::chrono::seconds(1);
  std::uint16_t port = 9480;

  bool operator==(const GrpcOptions&) const = default;
};

/// Reads probes.grpc (the keys: docs/configuration.md) into c.grpc; in a build without gRPC
/// the section is an error.
void Decode(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c);

/// The metric families the kind exports (its probe declares them: metrics::Declare*).
inline constexpr FamilyDecl kFamilies[] = {
    {"podnet_grpc_request_duration_seconds"},
    {"podnet_grpc_requests_total"},
};

/// Whether this build has gRPC; without it, a configuration that asks for it (probes.grpc,
/// responders.grpc, at `n` and `path`) fails in `d` instead of being ignored.
bool Built(Decoder& d, const YAML::Node& n, const std::string& path);

}  // namespace podnet::config::kinds::grpc
