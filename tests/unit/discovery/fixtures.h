#pragma once

// Kubernetes API objects shaped as a real API server sends them (kubectl get --raw, v1.29;
// uids shortened), for the discovery and App tests.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace podnet::testing {

using nlohmann::json;

// One endpoint of an EndpointSlice.
inline json EndpointJson(const std::string& pod, const std::string& ip, const std::string& node,
                         const std::string& zone, json ready = true, bool terminating = false) {
  json conditions = {{"serving", true}, {"terminating", terminating}};
  if (!ready.is_null()) conditions["ready"] = ready;
  return {{"addresses", {ip}},
          {"conditions", conditions},
          {"nodeName", node},
          {"zone", zone},
          {"targetRef",
           {{"kind", "Pod"}, {"namespace", "podnet"}, {"name", pod}, {"uid", "u-" + pod}}}};
}

// `endpoints` is a std::vector, not a json: `json x = {one_json}` is a one-element array with
// gcc and a copy of `one_json` with clang (nlohmann/json's README, "brace initialization"),
// which made single-endpoint slices objects, not arrays, in the clang (sanitizer) builds.
inline json SliceJson(const std::string& name, const std::string& rv,
                      const std::vector<json>& endpoints, const std::string& type = "IPv4") {
  return {{"metadata",
           {{"name", name},
            {"generateName", "podnet-"},
            {"namespace", "podnet"},
            {"uid", "uid-" + name},
            {"resourceVersion", rv},
            {"generation", 3},
            {"creationTimestamp", "2026-11-29T10:00:00Z"},
            {"labels",
             {{"endpointslice.kubernetes.io/managed-by", "endpointslice-controller.k8s.io"},
              {"kubernetes.io/service-name", "podnet"},
              {"service.kubernetes.io/headless", ""}}},
            {"ownerReferences",
             {{{"apiVersion", "v1"},
               {"kind", "Service"},
               {"name", "podnet"},
               {"uid", "svc-uid"},
               {"controller", true},
               {"blockOwnerDeletion", true}}}}}},
          {"addressType", type},
          {"endpoints", json(endpoints)},
          {"ports", {{{"name", "http"}, {"protocol", "TCP"}, {"port", 9479}}}}};
}

inline std::string ListJson(const std::string& rv, const std::vector<json>& slices) {
  json items = json::array();
  for (const auto& s : slices) items.push_back(s);
  return json{{"kind", "EndpointSliceList"},
              {"apiVersion", "discovery.k8s.io/v1"},
              {"metadata", {{"resourceVersion", rv}}},
              {"items", items}}
      .dump();
}

inline std::string EventJson(const std::string& type, json object) {
  if (type != "ERROR") {
    object["kind"] = "EndpointSlice";
    object["apiVersion"] = "discovery.k8s.io/v1";
  }
  return json{{"type", type}, {"object", object}}.dump() + "\n";
}

}  // namespace podnet::testing
