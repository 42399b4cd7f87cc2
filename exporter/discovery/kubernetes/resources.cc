#include "exporter/discovery/kubernetes/resources.h"

#include <nlohmann/json.hpp>

namespace podnet::discovery::kubernetes {
namespace {

using nlohmann::json;

// object[key] when object is an object holding a string there, else "".
std::string StringAt(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

// A condition (`ready`, `terminating`): std::nullopt when absent or null.
std::optional<bool> Condition(const json& endpoint, const char* name) {
  auto c = endpoint.find("conditions");
  if (c == endpoint.end() || !c->is_object()) return std::nullopt;
  auto v = c->find(name);
  if (v == c->end() || !v->is_boolean()) return std::nullopt;
  return v->get<bool>();
}

}  // namespace

std::string ObjectName(const json& object) {
  if (!object.is_object()) return "";
  auto m = object.find("metadata");
  return m == object.end() ? "" : StringAt(*m, "name");
}

std::optional<std::string> NodeZone(const json& node, std::string* error) {
  if (!node.is_object() || !node.contains("metadata") || !node["metadata"].is_object()) {
    *error = "not a Node object (no metadata)";
    return std::nullopt;
  }
  const json& meta = node["metadata"];
  auto labels = meta.find("labels");
  if (labels == meta.end() || !labels->is_object()) return std::string();
  std::string zone = StringAt(*labels, "topology.kubernetes.io/zone");
  if (zone.empty()) zone = StringAt(*labels, "failure-domain.beta.kubernetes.io/zone");
  return zone;
}

std::optional<std::vector<Endpoint>> ReadyEndpoints(const json& slice, std::string* error) {
  if (ObjectName(slice).empty()) {
    *error = "not an EndpointSlice (no metadata.name)";
    return std::nullopt;
  }
  std::vector<Endpoint> out;
  std::string type = StringAt(slice, "addressType");
  if (type != "IPv4" && type != "IPv6") return out;
  auto endpoints = slice.find("endpoints");
  if (endpoints == slice.end() || endpoints->is_null()) return out;  // no ready Pods: omitted
  if (!endpoints->is_array()) {
    *error = "EndpointSlice " + ObjectName(slice) + ": endpoints is not an array";
    return std::nullopt;
  }
  for (const auto& e : *endpoints) {
    if (!e.is_object()) continue;
    if (!Condition(e, "ready").value_or(true) || Condition(e, "terminating").value_or(false)) {
      continue;
    }
    auto addresses = e.find("addresses");
    if (addresses == e.end() || !addresses->is_array() || addresses->empty() ||
        !(*addresses)[0].is_string()) {
      continue;
    }
    boost::system::error_code ec;
    auto address = boost::asio::ip::make_address((*addresses)[0].get<std::string>(), ec);
    if (ec || (type == "IPv4") != address.is_v4()) continue;
    Endpoint ep;
    ep.address = address;
    auto ref = e.find("targetRef");
    if (ref != e.end()) ep.name = StringAt(*ref, "name");
    if (ep.name.empty()) ep.name = address.to_string();
    ep.node = StringAt(e, "nodeName");
    ep.zone = StringAt(e, "zone");
    out.push_back(std::move(ep));
  }
  return out;
}

std::vector<Endpoint> MergeSlices(const std::map<std::string, std::vector<Endpoint>>& slices) {
  std::map<std::string, Endpoint> by_name;
  auto better = [](const Endpoint& a, const Endpoint& b) {  // a preferred over b
    if (a.address.is_v4() != b.address.is_v4()) return a.address.is_v4();
    return a.address < b.address;
  };
  for (const auto& [slice, endpoints] : slices) {
    for (const auto& e : endpoints) {
      auto [it, inserted] = by_name.emplace(e.name, e);
      if (!inserted && better(e, it->second)) it->second = e;
    }
  }
  std::vector<Endpoint> out;
  out.reserve(by_name.size());
  for (auto& [name, e] : by_name) out.push_back(std::move(e));
  return out;
}

}  // namespace podnet::discovery::kubernetes
