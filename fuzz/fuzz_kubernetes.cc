// Kubernetes API bodies as discovery decodes them: metav1.Status (the body of every error
// response, 401..503, and of a watch's ERROR event), EndpointSlices (list items and watch
// events), Nodes (the zone label) and object names; any JSON value in any field, and bodies
// that are not JSON at all.
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "exporter/discovery/kubernetes/resources.h"

namespace k8s = podnet::discovery::kubernetes;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // An error response's body, read whatever it is (break test: {"kind":123} aborted).
  (void)k8s::StatusMessage(std::string_view(reinterpret_cast<const char*>(data), size));
  auto doc = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  std::string error;
  (void)k8s::NodeZone(doc, &error);
  (void)k8s::ObjectName(doc);
  std::map<std::string, std::vector<k8s::Endpoint>> slices;
  if (auto eps = k8s::ReadyEndpoints(doc, &error)) slices[k8s::ObjectName(doc)] = *eps;
  // A list's items, as discovery reads them.
  if (const auto* items = k8s::ArrayAt(doc, "items")) {
    for (const auto& item : *items) {
      if (auto eps = k8s::ReadyEndpoints(item, &error)) slices[k8s::ObjectName(item)] = *eps;
    }
  }
  // A watch event, as discovery reads it: its type, its object's resourceVersion, and for an
  // ERROR event the Status in the object (code 410 = relist).
  (void)k8s::StringAt(doc, "type");
  if (const auto* object = k8s::ObjectAt(doc, "object")) {
    (void)k8s::IntegerAt(*object, "code");
    (void)k8s::StringAt(*object, "message");
    if (const auto* meta = k8s::ObjectAt(*object, "metadata")) {
      (void)k8s::StringAt(*meta, "resourceVersion");
    }
    (void)k8s::ReadyEndpoints(*object, &error);
    (void)k8s::NodeZone(*object, &error);
  }
  (void)k8s::MergeSlices(slices);
  return 0;
}
