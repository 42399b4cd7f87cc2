#pragma once

#include <boost/asio/ip/address.hpp>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace podnet::discovery::kubernetes {

/// One probe Pod found in the Service's EndpointSlices: a peer candidate before classification.
struct Endpoint {
  std::string name;  // targetRef.name (the Pod); the address when there is no targetRef
  boost::asio::ip::address address;
  std::string node;  // nodeName; "" when the slice does not say
  std::string zone;  // zone; "" when the slice does not say

  bool operator==(const Endpoint&) const = default;
};

/// The zone of a Node object (core/v1): label topology.kubernetes.io/zone, else the deprecated
/// failure-domain.beta.kubernetes.io/zone; "" when it has neither. std::nullopt and *error when
/// `node` is not a Node-shaped object (no metadata).
std::optional<std::string> NodeZone(const nlohmann::json& node, std::string* error);

/// The ready endpoints of one discovery.k8s.io/v1 EndpointSlice
/// (https://kubernetes.io/docs/reference/kubernetes-api/service-resources/endpoint-slice-v1/):
///  - addressType IPv4 or IPv6 (FQDN slices give none);
///  - conditions.ready true or absent ("unknown state" — the API says consumers should read it
///    as ready), and conditions.terminating not true;
///  - the first address of each endpoint (the API: addresses are fungible, consumers may use
///    the first only); addresses that are not IP literals are skipped.
/// std::nullopt and *error when the object is not EndpointSlice-shaped (no metadata.name, a
/// non-array endpoints).
std::optional<std::vector<Endpoint>> ReadyEndpoints(const nlohmann::json& slice,
                                                    std::string* error);

/// The name of a Kubernetes object (metadata.name), "" when absent.
std::string ObjectName(const nlohmann::json& object);

/// The candidates of the Service: the endpoints of every current slice (by slice name), one
/// per Pod even when a Pod shows in several slices (slice churn, or an IPv4 and an IPv6 slice of
/// a dual-stack Service): an IPv4 address is preferred, then the smallest address. Sorted by
/// name.
std::vector<Endpoint> MergeSlices(const std::map<std::string, std::vector<Endpoint>>& slices);

}  // namespace podnet::discovery::kubernetes
