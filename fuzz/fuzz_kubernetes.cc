// Kubernetes API objects as discovery decodes them: EndpointSlices (list items and watch
// events), Nodes (the zone label) and object names; any JSON value in any field.
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "exporter/discovery/kubernetes/resources.h"

namespace k8s = podnet::discovery::kubernetes;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto doc = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  std::string error;
  (void)k8s::NodeZone(doc, &error);
  (void)k8s::ObjectName(doc);
  std::map<std::string, std::vector<k8s::Endpoint>> slices;
  if (auto eps = k8s::ReadyEndpoints(doc, &error)) slices[k8s::ObjectName(doc)] = *eps;
  // A list's items and a watch event's object, as discovery reads them.
  if (doc.is_object()) {
    if (auto items = doc.find("items"); items != doc.end() && items->is_array()) {
      for (const auto& item : *items) {
        if (auto eps = k8s::ReadyEndpoints(item, &error)) slices[k8s::ObjectName(item)] = *eps;
      }
    }
    if (auto object = doc.find("object"); object != doc.end()) {
      (void)k8s::ReadyEndpoints(*object, &error);
      (void)k8s::NodeZone(*object, &error);
    }
  }
  (void)k8s::MergeSlices(slices);
  return 0;
}
