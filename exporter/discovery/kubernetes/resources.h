#pragma once

#include <boost/asio/ip/address.hpp>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/topology/safe_text.h"

namespace podnet::discovery::kubernetes {

/// The name of the Service's port for the burst responder (deploy/kubernetes/base/service.yaml).
inline constexpr std::string_view kBurstPortName = "burst";

/// One probe Pod found in the Service's EndpointSlices: a peer candidate before classification.
struct Endpoint {
  std::string name;  // targetRef.name (the Pod); the address when there is no targetRef
  boost::asio::ip::address address;
  std::string node;  // nodeName; "" when the slice does not say
  std::string zone;  // zone; "" when the slice does not say
  // Whether the endpoint's slice lists a port named kBurstPortName; nullopt when the slice lists
  // no ports. The EndpointSlice controller leaves a Service port out of a Pod's endpoint when
  // the Pod declares no container port of the target port's name (getEndpointPorts in
  // kubernetes' pkg/controller/endpointslice), and puts Pods with other port sets in other
  // slices: a probe Pod without a `burst` container port sits in a slice without it.
  std::optional<bool> burst_port_named;

  bool operator==(const Endpoint&) const = default;
};

// Typed reads of API JSON. Every field the exporter reads from an API server's answer goes
// through these: a value of another JSON type than the one expected (a number where a string
// belongs, null, [], {}, true) reads as absent. nlohmann's value() and get<>() throw
// type_error on such a value instead, and an exception escaping a response handler ends the
// process: a hostile or broken API server must cost a bad_response count, never the Pod.

/// object[key] when `object` is a JSON object that has `key`, else nullptr.
const nlohmann::json* FieldAt(const nlohmann::json& object, std::string_view key);
/// object[key] when it is a string, else "". Only for values compared with constants (kind,
/// addressType): what is kept, labelled or logged is read with TextAt.
std::string StringAt(const nlohmann::json& object, std::string_view key);
/// object[key] when it is a string, as topology::SafeText(·, max_bytes) makes it: bounded, with
/// control characters, NUL and invalid UTF-8 escaped (counted in *repairs); "" otherwise. The
/// boundary for every string the API server sends that the exporter keeps, puts in a label or
/// logs: a 1 MB field must not become a 1 MB label value or log line, a NUL not stay in a label.
std::string TextAt(const nlohmann::json& object, std::string_view key, std::size_t max_bytes,
                   topology::TextRepairs* repairs = nullptr);
/// object[key] when it is an integer (signed or unsigned JSON number without fraction that fits
/// in long long), else std::nullopt.
std::optional<long long> IntegerAt(const nlohmann::json& object, std::string_view key);
/// object[key] when it is a boolean, else std::nullopt.
std::optional<bool> BoolAt(const nlohmann::json& object, std::string_view key);
/// object[key] when it is a JSON object, else nullptr.
const nlohmann::json* ObjectAt(const nlohmann::json& object, std::string_view key);
/// object[key] when it is a JSON array, else nullptr.
const nlohmann::json* ArrayAt(const nlohmann::json& object, std::string_view key);

/// The message of a metav1.Status body (`{"kind":"Status", "message": "..."}`), "" when the
/// body is not JSON, not a Status, or has no string message; TextAt's topology::kMaxMessageBytes.
std::string StatusMessage(std::string_view body);

/// The zone of a Node object (core/v1): label topology.kubernetes.io/zone, else the deprecated
/// failure-domain.beta.kubernetes.io/zone; "" when it has neither. A label value: read with
/// TextAt's topology::kMaxLabelValueBytes. std::nullopt and *error when `node` is not a
/// Node-shaped object (no metadata).
std::optional<std::string> NodeZone(const nlohmann::json& node, std::string* error,
                                    topology::TextRepairs* repairs = nullptr);

/// The ready endpoints of one discovery.k8s.io/v1 EndpointSlice
/// (https://kubernetes.io/docs/reference/kubernetes-api/service-resources/endpoint-slice-v1/):
///  - addressType IPv4 or IPv6 (FQDN slices give none);
///  - conditions.ready true or absent ("unknown state" — the API says consumers should read it
///    as ready), and conditions.terminating not true;
///  - the first address of each endpoint (the API: addresses are fungible, consumers may use
///    the first only); addresses that are not IP literals are skipped;
///  - names as TextAt reads them: targetRef.name and nodeName at most
///    topology::kMaxSubdomainBytes (Pod and Node names are DNS subdomains), zone at most
///    topology::kMaxLabelValueBytes (it is the Node's zone label's value);
///  - burst_port_named from the slice's ports (a port named kBurstPortName or not; nullopt
///    without ports).
/// std::nullopt and *error when the object is not EndpointSlice-shaped (no metadata.name, a
/// non-array endpoints).
std::optional<std::vector<Endpoint>> ReadyEndpoints(const nlohmann::json& slice, std::string* error,
                                                    topology::TextRepairs* repairs = nullptr);

/// Whether an EndpointSlice is managed by the EndpointSlice controller: label
/// endpointslice.kubernetes.io/managed-by = endpointslice-controller.k8s.io (the controller
/// sets it on every slice it writes; the API reference, EndpointSlice "Management"). Anyone who
/// may write EndpointSlices in the namespace can label one with the Service's name; only the
/// controller's list the Service's ready Pods. A slice without metadata or labels: false.
bool ControllerManaged(const nlohmann::json& slice);
inline constexpr std::string_view kEndpointSliceController = "endpointslice-controller.k8s.io";

/// The UID of the Service that owns an EndpointSlice: its ownerReferences entry of kind Service
/// with controller true (the controller writes exactly one); "" when there is none. TextAt's
/// topology::kMaxSubdomainBytes.
std::string ServiceUid(const nlohmann::json& slice, topology::TextRepairs* repairs = nullptr);

/// The name of a Kubernetes object (metadata.name), "" when absent; TextAt's
/// topology::kMaxSubdomainBytes.
std::string ObjectName(const nlohmann::json& object, topology::TextRepairs* repairs = nullptr);

/// Whether endpoint `a` is preferred over `b` for one Pod (or node) seen twice: an IPv4 address
/// first, then the smaller address. A total order on addresses: every Pod that merges the same
/// endpoints keeps the same one.
bool PreferredEndpoint(const Endpoint& a, const Endpoint& b);

/// The candidates of the Service: the endpoints of every current slice (by slice name), one
/// per Pod even when a Pod shows in several slices (slice churn, or an IPv4 and an IPv6 slice of
/// a dual-stack Service): an IPv4 address is preferred, then the smallest address. Sorted by
/// name.
std::vector<Endpoint> MergeSlices(const std::map<std::string, std::vector<Endpoint>>& slices);

}  // namespace podnet::discovery::kubernetes
