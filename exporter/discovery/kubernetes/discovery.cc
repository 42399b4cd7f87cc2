#include "exporter/discovery/kubernetes/discovery.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <map>
#include <nlohmann/json.hpp>

#include "exporter/discovery/kubernetes/discovery_impl.h"

namespace podnet::discovery::kubernetes {

namespace asio = boost::asio;
using nlohmann::json;

DiscoveryMetrics::DiscoveryMetrics(prometheus::Registry& registry) : registry_(registry) {
  errors_ = &prometheus::BuildCounter()
                 .Name("podnet_kubernetes_api_errors_total")
                 .Help("Failed Kubernetes API requests and watch streams, by resource and reason.")
                 .Register(registry);
  events_ = &prometheus::BuildCounter()
                 .Name("podnet_kubernetes_watch_events_total")
                 .Help("EndpointSlice watch events received, by watch (resource) and type.")
                 .Register(registry);
  lists_family_ = &prometheus::BuildCounter()
                       .Name("podnet_kubernetes_lists_total")
                       .Help(
                           "Successful EndpointSlice lists (the first one and every relist), by "
                           "watch (resource).")
                       .Register(registry);
  sanitized_ = &prometheus::BuildCounter()
                    .Name("podnet_kubernetes_strings_sanitized_total")
                    .Help(
                        "Strings of Kubernetes API answers cut to their bound (reason truncated) "
                        "or with control characters, NUL or invalid UTF-8 escaped (escaped).")
                    .Register(registry);
  candidates_family_ = &prometheus::BuildGauge()
                            .Name("podnet_discovery_candidates")
                            .Help(
                                "Ready probe Pods found in the Service's EndpointSlices or DNS "
                                "records (this Pod included), before peer selection, by where "
                                "they were read (source: watch, dns).")
                            .Register(registry);
  candidates_ = &candidates_family_->Add({{"source", "watch"}});
}

void DiscoveryMetrics::SetSource(std::string_view source) {
  std::map<std::string, std::string> labels = {{"source", std::string(source)}};
  if (candidates_family_->Has(labels)) return;
  double value = candidates_->Value();
  candidates_family_->Remove(candidates_);
  candidates_ = &candidates_family_->Add(labels);
  candidates_->Set(value);
}

DiscoveryMetrics::~DiscoveryMetrics() {
  registry_.Remove(*errors_);
  registry_.Remove(*events_);
  registry_.Remove(*lists_family_);
  registry_.Remove(*sanitized_);
  registry_.Remove(*candidates_family_);
}

std::optional<std::string> NodeZoneOf(const ApiResponse& r, const std::string& node,
                                      DiscoveryMetrics& metrics, std::string* reason,
                                      std::string* detail) {
  *reason = FailureReason(r);
  *detail = Describe(r);
  if (!reason->empty()) return std::nullopt;
  json object = json::parse(r.body, nullptr, false);
  std::string err;
  topology::TextRepairs repairs;
  auto zone = object.is_discarded() ? std::nullopt : NodeZone(object, &err, &repairs);
  metrics.Sanitized("node", repairs);
  if (!zone) {
    *reason = "bad_response";
    *detail = object.is_discarded() ? "not JSON" : err;
    return std::nullopt;
  }
  if (zone->empty()) {
    metrics.Error("node", "no_zone_label");
    spdlog::warn(
        "kubernetes: node {} has no topology.kubernetes.io/zone label: peers stay in path class "
        "unknown",
        node);
  } else {
    spdlog::info("kubernetes: this Pod's zone is {} (from node {})", *zone, node);
  }
  return zone;
}

void DiscoveryMetrics::Error(std::string_view resource, std::string_view reason) {
  errors_->Add({{"resource", std::string(resource)}, {"reason", std::string(reason)}}).Increment();
}

void DiscoveryMetrics::Event(std::string_view resource, std::string_view type) {
  events_->Add({{"resource", std::string(resource)}, {"type", std::string(type)}}).Increment();
}

void DiscoveryMetrics::Sanitized(std::string_view resource, const topology::TextRepairs& repairs) {
  if (!repairs.any()) return;
  for (auto [reason, n] :
       {std::pair{"truncated", repairs.truncated}, {"escaped", repairs.escaped}}) {
    if (n == 0) continue;
    sanitized_->Add({{"resource", std::string(resource)}, {"reason", reason}})
        .Increment(static_cast<double>(n));
  }
  auto now = std::chrono::steady_clock::now();
  if (last_sanitized_log_ && now - *last_sanitized_log_ < std::chrono::minutes(1)) return;
  last_sanitized_log_ = now;
  spdlog::warn(
      "kubernetes: {} answer had {} string(s) cut to their bound and {} with control characters "
      "or invalid UTF-8 escaped (logged at most once a minute; "
      "podnet_kubernetes_strings_sanitized_total counts all)",
      resource, repairs.truncated, repairs.escaped);
}

prometheus::Counter& DiscoveryMetrics::lists(std::string_view resource) {
  return lists_family_->Add({{"resource", std::string(resource)}});
}

Backoff::Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max,
                 std::chrono::milliseconds max_retry_after)
    : initial_(std::max(initial, std::chrono::milliseconds(1))),
      max_(std::max(max, initial_)),
      max_retry_after_(max_retry_after) {}

std::chrono::milliseconds Backoff::Next(std::chrono::seconds retry_after) {
  auto d = initial_;
  for (int i = 0; i < attempt_ && d < max_; ++i) d *= 2;  // bounded: stops at max_
  d = std::min(d, max_);
  if (attempt_ < 1000000) ++attempt_;  // the delay stops growing at max_; the count goes on
  std::uniform_int_distribution<long long> jitter(d.count() / 2, d.count());
  std::chrono::milliseconds delay(jitter(rng_));
  auto server = std::min<std::chrono::milliseconds>(retry_after, max_retry_after_);
  return std::max(delay, server);
}

namespace {

// RFC 3986 percent-encoding of everything but unreserved characters: valid names (DNS labels)
// pass unchanged; a configured name holding '/', '?' or '&' cannot change the request.
std::string Escape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

}  // namespace

std::string EndpointSlicesPath(const std::string& namespace_name, const std::string& service,
                               std::string_view resource_version) {
  return "/apis/discovery.k8s.io/v1/namespaces/" + Escape(namespace_name) +
         "/endpointslices?labelSelector=" + Escape("kubernetes.io/service-name=" + service) +
         (resource_version.empty() ? "" : "&resourceVersion=" + Escape(resource_version));
}

std::string NodePath(const std::string& node) { return "/api/v1/nodes/" + Escape(node); }

std::string ServicePath(const std::string& namespace_name, const std::string& name) {
  return "/api/v1/namespaces/" + Escape(namespace_name) + "/services/" + Escape(name);
}

template class BasicKubernetesDiscovery<std::chrono::steady_clock>;

}  // namespace podnet::discovery::kubernetes
