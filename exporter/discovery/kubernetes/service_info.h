#pragma once

#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exporter/discovery/kubernetes/api_client.h"
#include "exporter/discovery/kubernetes/discovery.h"

namespace podnet::discovery::kubernetes {

/// A service-probe target that names its Kubernetes Service.
struct ServiceRef {
  std::string target;          // the target's name: the `service` label of the probe's series
  std::string namespace_name;  // the Service's namespace
  std::string name;            // the Service's name

  bool operator==(const ServiceRef&) const = default;
};

/// What a Service asks of the dataplane about where its traffic goes.
struct ServiceLocality {
  /// spec.trafficDistribution (PreferClose, PreferSameZone, PreferSameNode; Kubernetes ≥ 1.30),
  /// "" when unset.
  std::string traffic_distribution;
  /// spec.internalTrafficPolicy (Cluster or Local), "" when unset (the API defaults it to
  /// Cluster).
  std::string internal_traffic_policy;
  /// At least one endpoint of the Service's EndpointSlices carries hints.forZones: the
  /// EndpointSlice controller (topology-aware routing, annotation
  /// service.kubernetes.io/topology-mode: Auto) or trafficDistribution asked kube-proxy to prefer
  /// endpoints of the client's zone.
  bool zone_hints = false;

  bool operator==(const ServiceLocality&) const = default;
};

/// Reads spec.trafficDistribution and spec.internalTrafficPolicy of a core/v1 Service
/// (https://kubernetes.io/docs/reference/kubernetes-api/service-resources/service-v1/); zone_hints
/// stays false. Both read with TextAt's topology::kMaxLabelValueBytes (they become label values).
/// std::nullopt and *error when `service` is not Service-shaped (no metadata, or a spec that is
/// not an object). Fields of another JSON type read as absent.
std::optional<ServiceLocality> ReadServiceLocality(const nlohmann::json& service,
                                                   std::string* error,
                                                   topology::TextRepairs* repairs = nullptr);

/// Whether any endpoint of an EndpointSliceList's items has a non-empty hints.forZones
/// (discovery.k8s.io/v1). A malformed list reads as no hints.
bool SlicesHaveZoneHints(const nlohmann::json& list);

/// Exports what each referenced Service asks for as
///   podnet_service_info{service, service_namespace, service_name, traffic_distribution,
///                       internal_traffic_policy, zone_hints="true"|"false"} 1
/// so that the rules can compare it with the service probe's answers by zone
/// (alert PodnetServiceTrafficLeavesZone, which reads the max over Pods). Every `interval`, when
/// `on_duty` says so (nullptr: always), it GETs each Service and the EndpointSlices labelled
/// kubernetes.io/service-name=NAME in its namespace (RBAC: get services, list endpointslices in
/// that namespace); off duty it asks nothing and exports no series, so that a few Pods of a
/// DaemonSet carry the API cost, not every node. A failed request counts
/// podnet_kubernetes_api_errors_total{resource="services"|"service_endpointslices", reason} and
/// keeps the last series; a Service that is gone (404) loses its series. The family is removed by
/// the destructor. Not thread-safe: use it on its io_context (the control loop).
class ServiceInfoPoller {
 public:
  ServiceInfoPoller(boost::asio::io_context& io, std::unique_ptr<ApiClient> client,
                    std::vector<ServiceRef> refs, std::chrono::milliseconds interval,
                    prometheus::Registry& registry, DiscoveryMetrics& metrics,
                    std::function<bool()> on_duty = nullptr);
  ~ServiceInfoPoller();  // Stop()s and removes the family
  ServiceInfoPoller(const ServiceInfoPoller&) = delete;
  ServiceInfoPoller& operator=(const ServiceInfoPoller&) = delete;

  /// Polls at once (when on duty), then every interval.
  void Start();
  /// Polls now (a request still in flight is not doubled), then every interval from now; a
  /// no-op when stopped. For a change of duty that should not wait an interval.
  void PollNow();
  /// Cancels the requests in flight and the timer; no callback runs after it.
  void Stop();

  const std::vector<ServiceRef>& refs() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace podnet::discovery::kubernetes
