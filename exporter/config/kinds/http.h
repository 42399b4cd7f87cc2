#pragma once

// probes.http: its options, decoder and metric families (the probe: probes/http/).

#include <chrono>
#include <cstdint>
#include <string>

#include "exporter/config/kinds/section.h"
#include "exporter/config/units.h"

namespace podnet::config::kinds::http {

/// probes.http: every `interval`, towards each peer, one timed run per mode of `duration` at
/// `qps` requests per second spread over `connections` TCP connections, against the peer's
/// HTTP responder (`GET path`, default /echo). The modes run one after the other, keep-alive
/// first. A request not answered `timeout` after its intended start is a timeout.
struct HttpOptions {
  Duration interval = std::chrono::seconds(30);
  Duration duration = std::chrono::seconds(2);
  int qps = 100;
  int connections = 4;
  bool keepalive = true;       // modes: keepalive — connections opened before the timed run
  bool new_connection = true;  // modes: new_connection — connect + request + close per request
  Duration timeout = std::chrono::seconds(1);
  std::string path = "/echo";
  std::uint64_t max_body_bytes = 65536;  // a longer response body is body_too_large

  bool operator==(const HttpOptions&) const = default;
};

/// Reads probes.http (the keys: docs/configuration.md) into c.http.
void Decode(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c);

/// The metric families the kind exports (its probe declares them: metrics::Declare*).
inline constexpr FamilyDecl kFamilies[] = {
    {"podnet_http_connect_duration_seconds", false},
    {"podnet_http_late_requests_total"},
    {"podnet_http_reconnects_total"},
    {"podnet_http_request_duration_seconds"},
    {"podnet_http_requests_total"},
    {"podnet_http_time_to_first_byte_seconds", false},
};

}  // namespace podnet::config::kinds::http
