#pragma once

// probes.service: its options, decoder and metric families (the probe: probes/service/).

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "exporter/config/kinds/section.h"
#include "exporter/config/units.h"

namespace podnet::config::kinds::service {

enum class ServiceProtocol { kUdp, kHttp };
const char* ServiceProtocolName(ServiceProtocol p);  // "udp" | "http"

/// One entry of probes.service.targets: a Service address whose backends are podnet responders.
struct ServiceTarget {
  std::string name;     // the `service` label value; unique in the list
  std::string address;  // an IP literal (a ClusterIP) or a DNS name, resolved every round
  std::uint16_t port = 9479;
  ServiceProtocol protocol = ServiceProtocol::kUdp;  // udp: UDP echo; http: GET /echo
  /// The Kubernetes Service behind `address` (key kubernetes_service: "NAMESPACE/NAME"; derived
  /// from an address NAME.NAMESPACE.svc[.DOMAIN] when absent; both "" when unknown). With
  /// peers.kubernetes the exporter reads what it asks of the dataplane (podnet_service_info).
  std::string kubernetes_namespace;
  std::string kubernetes_name;

  bool operator==(const ServiceTarget&) const = default;
};

/// probes.service: every `interval`, each target gets `count` requests `spacing` apart, each a
/// flow of its own (UDP: a new socket, so a new source port; HTTP: a new connection), so that a
/// Service's load balancing (kube-proxy's DNAT, conntrack) picks a backend for every request. A
/// request unanswered `timeout` after it was sent fails with reason "timeout"; resolving a DNS
/// name may take up to `timeout` before the first request.
struct ServiceOptions {
  Duration interval = std::chrono::seconds(10);
  int count = 30;
  Duration spacing = std::chrono::milliseconds(20);
  Duration timeout = std::chrono::seconds(1);
  std::vector<ServiceTarget> targets;

  bool operator==(const ServiceOptions&) const = default;
};

/// Reads probes.service (the keys: docs/configuration.md) into c.service.
void Decode(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c);

/// The metric families the kind exports (its probe declares them: metrics::Declare*).
inline constexpr FamilyDecl kFamilies[] = {
    {"podnet_service_backend_zones_expired_total"},
    {"podnet_service_request_errors_total"},
    {"podnet_service_requests_total"},
    {"podnet_service_rtt_seconds"},
};

}  // namespace podnet::config::kinds::service
