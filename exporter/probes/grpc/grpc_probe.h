#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "exporter/config/kinds/grpc.h"
#include "exporter/probes/probe.h"
#include "exporter/probes/series_estimate.h"

namespace podnet::probes::grpc {

// The options this kind reads (its section of the configuration: config/kinds/grpc.h).
using config::kinds::grpc::GrpcOptions;

/// The gRPC health probe kind (probes.grpc): grpc.health.v1.Health/Check (empty service name)
/// on libgrpc++'s GenericStub, over one insecure HTTP/2 channel per peer that stays open between
/// rounds (so a call is timed like a keep-alive HTTP request; the channel connects when the
/// probe is made). Calls run on gRPC's threads; their outcomes are handed to the probe loop.
///
/// Series per peer (metrics::PeerLabels plus):
///   podnet_grpc_request_duration_seconds  calls answered OK with status SERVING
///   podnet_grpc_requests_total{code}      gRPC status code name ("OK", "UNAVAILABLE", ...)
///   podnet_probe_errors_total{probe="grpc",reason}  reasons: "timeout" (DEADLINE_EXCEEDED),
///       "unavailable", "unimplemented", other codes in lower case, "not_serving" (an OK
///       answer whose status is not SERVING), "malformed_response"
std::shared_ptr<ProbeKind> MakeGrpcKind(const GrpcOptions& options, ProbeEnv& env);

/// The series this kind exports from one Pod, once every probe has run a round and every answer
/// was the healthy one: its families into `n` (probes/series_estimate.h); returns how many
/// podnet_probe_sent_bytes_total series it adds (as many received). `c` turns the kind on.
std::size_t CountSeries(const config::Config& c, SeriesCounter& n);

/// grpc.health.v1.HealthCheckResponse.status from its protobuf encoding, read as protobuf's
/// runtime reads it (libprotobuf's UnknownFieldSet): field 1 as a varint, the last one if it
/// comes more than once, its low 32 bits as a signed enum value; absent = 0 UNKNOWN; fields of
/// other numbers or wire types skipped (proto3 unknown fields). std::nullopt when the bytes are
/// not a protobuf message (a varint or a length cut short, an unmatched group end, a wire type
/// 6 or 7, field number 0).
std::optional<int> DecodeHealthStatus(std::span<const std::uint8_t> message);

/// The canonical name of a gRPC status code ("OK", "DEADLINE_EXCEEDED", ...).
const char* StatusCodeName(int code);

}  // namespace podnet::probes::grpc
