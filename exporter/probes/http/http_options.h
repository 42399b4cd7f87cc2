#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "exporter/config/units.h"

namespace podnet::probes::http {

/// probes.http: every `interval`, towards each peer, one timed run per mode of `duration` at
/// `qps` requests per second spread over `connections` TCP connections, against the peer's
/// HTTP responder (`GET path`, default /echo). The modes run one after the other, keep-alive
/// first. A request not answered `timeout` after its intended start is a timeout.
struct HttpOptions {
  config::Duration interval = std::chrono::seconds(30);
  config::Duration duration = std::chrono::seconds(2);
  int qps = 100;
  int connections = 4;
  bool keepalive = true;       // modes: keepalive — connections opened before the timed run
  bool new_connection = true;  // modes: new_connection — connect + request + close per request
  config::Duration timeout = std::chrono::seconds(1);
  std::string path = "/echo";
  std::uint64_t max_body_bytes = 65536;  // a longer response body is body_too_large

  bool operator==(const HttpOptions&) const = default;
};

}  // namespace podnet::probes::http
