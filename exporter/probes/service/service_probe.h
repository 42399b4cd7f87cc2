#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "exporter/config/kinds/service.h"
#include "exporter/probes/probe.h"
#include "exporter/probes/series_estimate.h"
#include "exporter/topology/topology.h"

namespace podnet::probes::service {

// The options this kind reads (its section of the configuration: config/kinds/service.h).
using config::kinds::service::ServiceOptions;
using config::kinds::service::ServiceProtocol;
using config::kinds::service::ServiceProtocolName;
using config::kinds::service::ServiceTarget;

/// The Service locality probe kind (probes.service): does traffic to a Service stay in the zone?
/// Its targets are not peers but Service addresses (a ClusterIP, or a DNS name resolved every
/// round through the system resolver, getaddrinfo) whose backends are podnet responders. Every
/// round sends `count` requests `spacing` apart to each target, each one a flow of its own —
/// UDP: a new socket, so a new ephemeral source port; HTTP: a new TCP connection
/// ("Connection: close") — because conntrack pins a flow to the backend the Service's load
/// balancer (kube-proxy's DNAT rule, an eBPF dataplane) chose for its first packet: requests on
/// one flow would all land on one backend and the shares would mean nothing. Each answer names
/// the responder that served it (UDP: the identity record of wire/echo.h, asked for in a
/// kIdentityPayloadSize-byte request; HTTP: the Podnet-Node and Podnet-Zone response fields),
/// and is attributed to the path class from this Pod to that backend (Attribute).
///
/// Times: UDP from the kernel's TX timestamp to its RX timestamp (SO_TIMESTAMPING, as the RTT
/// probe; user-space stamps next to the system calls where the kernel gives none); HTTP from the
/// request written on the new connection to the response's first byte (one round trip; the
/// handshake is not in it).
///
/// Series (labels service = the target's name, source_node, source_zone):
///   podnet_service_requests_total{backend_zone, path_class}  answered requests;
///       path_class "unknown" and backend_zone "" when the answer did not say who answered. At
///       most 32 backend_zone values a target at a time (more: reason too_many_zones); a zone
///       without an answer in 30 answered rounds loses its series and its slot
///   podnet_service_backend_zones_expired_total  backend_zone values freed so
///   podnet_service_rtt_seconds{path_class}  histogram, metrics::LatencyBuckets()
///   podnet_service_request_errors_total{reason}  requests without a good answer: "timeout",
///       "refused", "unreachable", "bad_response" (not our reply, or an identity a label must
///       not carry), "too_many_zones" (an answer from a 33rd zone), "resolve" (once per round: the
///       name did not resolve, nothing was sent), "socket" / "send_failed" (UDP), and the HTTP
///       client's reasons (http_client.h: FailureReason) for HTTP
///   podnet_probe_{sent,received}_bytes_total{probe="service"}  UDP: datagrams with IP and UDP
///       headers; HTTP: TCP payload bytes (the HTTP probe's measure)
/// A target that leaves the configuration takes its series with it.
std::shared_ptr<ProbeKind> MakeServiceKind(const ServiceOptions& options, ProbeEnv& env);

/// The series this kind exports from one Pod, once every probe has run a round and every answer
/// was the healthy one: its families into `n` (probes/series_estimate.h); returns how many
/// podnet_probe_sent_bytes_total series it adds (as many received). `c` turns the kind on.
std::size_t CountSeries(const config::Config& c, SeriesCounter& n);

/// Where an answer came from, as its labels.
struct Attribution {
  std::string backend_zone;  // "" when the answer carried no identity
  topology::PathClass path = topology::PathClass::kUnknown;

  bool operator==(const Attribution&) const = default;
};

/// The path class from `self` to the backend that answered: topology::Classify(self, node, zone)
/// when the answer identified its responder (`identified`), else unknown with no zone.
Attribution Attribute(const topology::Self& self, bool identified, std::string_view node,
                      std::string_view zone);

}  // namespace podnet::probes::service
