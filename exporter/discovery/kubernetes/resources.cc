#include "exporter/discovery/kubernetes/resources.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

namespace podnet::discovery::kubernetes {
namespace {

using nlohmann::json;

// A condition (`ready`, `terminating`): std::nullopt when absent, null or not a boolean.
std::optional<bool> Condition(const json& endpoint, const char* name) {
  const json* c = ObjectAt(endpoint, "conditions");
  return c ? BoolAt(*c, name) : std::nullopt;
}

}  // namespace

const json* FieldAt(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string StringAt(const json& object, std::string_view key) {
  const json* v = FieldAt(object, key);
  return v && v->is_string() ? v->get<std::string>() : "";
}

std::string TextAt(const json& object, std::string_view key, std::size_t max_bytes,
                   topology::TextRepairs* repairs) {
  const json* v = FieldAt(object, key);
  if (!v || !v->is_string()) return "";
  return topology::SafeText(v->get_ref<const std::string&>(), max_bytes, repairs);
}

std::optional<long long> IntegerAt(const json& object, std::string_view key) {
  const json* v = FieldAt(object, key);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) {
    auto u = v->get<unsigned long long>();
    if (u > static_cast<unsigned long long>(std::numeric_limits<long long>::max())) {
      return std::nullopt;
    }
    return static_cast<long long>(u);
  }
  if (v->is_number_integer()) return v->get<long long>();
  return std::nullopt;
}

std::optional<bool> BoolAt(const json& object, std::string_view key) {
  const json* v = FieldAt(object, key);
  return v && v->is_boolean() ? std::optional<bool>(v->get<bool>()) : std::nullopt;
}

const json* ObjectAt(const json& object, std::string_view key) {
  const json* v = FieldAt(object, key);
  return v && v->is_object() ? v : nullptr;
}

const json* ArrayAt(const json& object, std::string_view key) {
  const json* v = FieldAt(object, key);
  return v && v->is_array() ? v : nullptr;
}

std::string StatusMessage(std::string_view body) {
  auto j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (StringAt(j, "kind") != "Status") return "";
  return TextAt(j, "message", topology::kMaxMessageBytes);
}

std::string ObjectName(const json& object, topology::TextRepairs* repairs) {
  const json* m = ObjectAt(object, "metadata");
  return m ? TextAt(*m, "name", topology::kMaxSubdomainBytes, repairs) : "";
}

bool ControllerManaged(const json& slice) {
  const json* m = ObjectAt(slice, "metadata");
  const json* labels = m ? ObjectAt(*m, "labels") : nullptr;
  return labels &&
         StringAt(*labels, "endpointslice.kubernetes.io/managed-by") == kEndpointSliceController;
}

std::string ServiceUid(const json& slice, topology::TextRepairs* repairs) {
  const json* m = ObjectAt(slice, "metadata");
  const json* owners = m ? ArrayAt(*m, "ownerReferences") : nullptr;
  if (!owners) return "";
  for (const auto& o : *owners) {
    if (StringAt(o, "kind") == "Service" && BoolAt(o, "controller").value_or(false)) {
      return TextAt(o, "uid", topology::kMaxSubdomainBytes, repairs);
    }
  }
  return "";
}

std::optional<std::string> NodeZone(const json& node, std::string* error,
                                    topology::TextRepairs* repairs) {
  const json* meta = ObjectAt(node, "metadata");
  if (!meta) {
    *error = "not a Node object (no metadata)";
    return std::nullopt;
  }
  const json* labels = ObjectAt(*meta, "labels");
  if (!labels) return std::string();
  constexpr std::size_t kMax = topology::kMaxLabelValueBytes;
  std::string zone = TextAt(*labels, "topology.kubernetes.io/zone", kMax, repairs);
  if (zone.empty()) zone = TextAt(*labels, "failure-domain.beta.kubernetes.io/zone", kMax, repairs);
  return zone;
}

std::optional<std::vector<Endpoint>> ReadyEndpoints(const json& slice, std::string* error,
                                                    topology::TextRepairs* repairs) {
  if (ObjectName(slice).empty()) {
    *error = "not an EndpointSlice (no metadata.name)";
    return std::nullopt;
  }
  std::vector<Endpoint> out;
  std::string type = StringAt(slice, "addressType");
  if (type != "IPv4" && type != "IPv6") return out;
  const json* endpoints = FieldAt(slice, "endpoints");
  if (!endpoints || endpoints->is_null()) return out;  // no ready Pods: omitted
  if (!endpoints->is_array()) {
    *error = "EndpointSlice " + ObjectName(slice) + ": endpoints is not an array";
    return std::nullopt;
  }
  std::optional<bool> burst_port_named;
  if (const json* ports = ArrayAt(slice, "ports"); ports && !ports->empty()) {
    burst_port_named = std::any_of(ports->begin(), ports->end(), [](const json& p) {
      return StringAt(p, "name") == kBurstPortName;
    });
  }
  for (const auto& e : *endpoints) {
    if (!e.is_object()) continue;
    if (!Condition(e, "ready").value_or(true) || Condition(e, "terminating").value_or(false)) {
      continue;
    }
    const json* addresses = ArrayAt(e, "addresses");
    if (!addresses || addresses->empty() || !(*addresses)[0].is_string()) continue;
    boost::system::error_code ec;
    auto address = boost::asio::ip::make_address((*addresses)[0].get<std::string>(), ec);
    if (ec || (type == "IPv4") != address.is_v4()) continue;
    Endpoint ep;
    ep.address = address;
    if (const json* ref = FieldAt(e, "targetRef")) {
      ep.name = TextAt(*ref, "name", topology::kMaxSubdomainBytes, repairs);
    }
    if (ep.name.empty()) ep.name = address.to_string();
    ep.node = TextAt(e, "nodeName", topology::kMaxSubdomainBytes, repairs);
    ep.zone = TextAt(e, "zone", topology::kMaxLabelValueBytes, repairs);
    ep.burst_port_named = burst_port_named;
    out.push_back(std::move(ep));
  }
  return out;
}

bool PreferredEndpoint(const Endpoint& a, const Endpoint& b) {
  if (a.address.is_v4() != b.address.is_v4()) return a.address.is_v4();
  return a.address < b.address;
}

std::vector<Endpoint> MergeSlices(const std::map<std::string, std::vector<Endpoint>>& slices) {
  std::map<std::string, Endpoint> by_name;
  for (const auto& [slice, endpoints] : slices) {
    for (const auto& e : endpoints) {
      auto [it, inserted] = by_name.emplace(e.name, e);
      if (!inserted && PreferredEndpoint(e, it->second)) it->second = e;
    }
  }
  std::vector<Endpoint> out;
  out.reserve(by_name.size());
  for (auto& [name, e] : by_name) out.push_back(std::move(e));
  return out;
}

}  // namespace podnet::discovery::kubernetes
