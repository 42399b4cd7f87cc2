#pragma once

#include <cstddef>
#include <memory>

#include "exporter/config/kinds/http.h"
#include "exporter/probes/probe.h"
#include "exporter/probes/series_estimate.h"

namespace podnet::probes::http {

// The options this kind reads (its section of the configuration: config/kinds/http.h).
using config::kinds::http::HttpOptions;

/// The HTTP request-latency probe kind (probes.http): HTTP/1.1 GETs of the peers' /echo
/// responder, on Boost.Beast, in two modes run one after the other each round:
///   keepalive:      `connections` persistent connections are opened before the timed run; each
///                   request goes to an idle one (a connection that broke is reopened by the
///                   next request, which then carries the connect);
///   new_connection: connect + request ("Connection: close") per request, at most `connections`
///                   at once, timed from before the connect.
///
/// Open loop: request i of a run has the intended start t0 + i/qps. A request that cannot start
/// on time — no connection free, or the loop woke more than kLateThreshold after its time — is a
/// late start (podnet_http_late_requests_total) and its duration is measured from its intended
/// start (coordinated omission corrected); an on-time request is timed from its actual start.
/// Every request must end by intended start + timeout, else it fails with reason "timeout"
/// (nothing came) or "slow_response" (part of the response came).
///
/// Series per peer (metrics::PeerLabels plus):
///   podnet_http_request_duration_seconds{connection="keepalive"|"new"}  2xx responses, total
///   podnet_http_time_to_first_byte_seconds{connection}  request written → first response byte
///   podnet_http_connect_duration_seconds  TCP connects (both modes)
///   podnet_http_requests_total{connection,code}  code = HTTP status, "error" without a response
///   podnet_http_late_requests_total{connection}
///   podnet_probe_errors_total{probe="http",reason}  reasons: see FailureReason (http_client.h)
///   podnet_probe_{sent,received}_bytes_total{probe="http"}  TCP payload bytes
std::shared_ptr<ProbeKind> MakeHttpKind(const HttpOptions& options, ProbeEnv& env);

/// The series this kind exports from one Pod, once every probe has run a round and every answer
/// was the healthy one: its families into `n` (probes/series_estimate.h); returns how many
/// podnet_probe_sent_bytes_total series it adds (as many received). `c` turns the kind on.
std::size_t CountSeries(const config::Config& c, SeriesCounter& n);

/// A request that starts more than this after its intended start is late.
inline constexpr std::chrono::milliseconds kLateThreshold{1};

}  // namespace podnet::probes::http
