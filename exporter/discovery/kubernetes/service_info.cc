#include "exporter/discovery/kubernetes/service_info.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "exporter/discovery/kubernetes/resources.h"

namespace podnet::discovery::kubernetes {

using nlohmann::json;

std::optional<ServiceLocality> ReadServiceLocality(const json& service, std::string* error,
                                                   topology::TextRepairs* repairs) {
  if (!ObjectAt(service, "metadata")) {
    *error = "not a Service: no metadata";
    return std::nullopt;
  }
  const json* spec = FieldAt(service, "spec");
  if (spec && !spec->is_object() && !spec->is_null()) {
    *error = "not a Service: spec is not an object";
    return std::nullopt;
  }
  ServiceLocality out;
  if (spec && spec->is_object()) {
    // Both are enums of the API (the longest value, PreferSameZone, has 14 bytes), and become
    // label values: bounded as one.
    constexpr std::size_t kMax = topology::kMaxLabelValueBytes;
    out.traffic_distribution = TextAt(*spec, "trafficDistribution", kMax, repairs);
    out.internal_traffic_policy = TextAt(*spec, "internalTrafficPolicy", kMax, repairs);
  }
  return out;
}

bool SlicesHaveZoneHints(const json& list) {
  const json* items = ArrayAt(list, "items");
  if (!items) return false;
  for (const json& slice : *items) {
    const json* endpoints = ArrayAt(slice, "endpoints");
    if (!endpoints) continue;
    for (const json& endpoint : *endpoints) {
      const json* hints = ObjectAt(endpoint, "hints");
      const json* zones = hints ? ArrayAt(*hints, "forZones") : nullptr;
      if (zones && !zones->empty()) return true;
    }
  }
  return false;
}

class ServiceInfoPoller::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(boost::asio::io_context& io, std::unique_ptr<ApiClient> client, std::vector<ServiceRef> refs,
       std::chrono::milliseconds interval, prometheus::Registry& registry,
       DiscoveryMetrics& metrics, std::function<bool()> on_duty)
      : client_(std::move(client)),
        refs_(std::move(refs)),
        interval_(std::max(interval, std::chrono::milliseconds(1))),
        registry_(registry),
        metrics_(metrics),
        on_duty_(std::move(on_duty)),
        timer_(io),
        state_(refs_.size()) {
    family_ = &prometheus::BuildGauge()
                   .Name("podnet_service_info")
                   .Help(
                       "What a probed Service asks of the dataplane (1): trafficDistribution, "
                       "internalTrafficPolicy and whether its EndpointSlices carry zone hints.")
                   .Register(registry_);
  }

  // The family outlives no poller: ~ServiceInfoPoller removes it after Stop(), when no
  // callback can touch it any more (a cancelled timer's handler may still hold this Impl).
  void RemoveFamily() { registry_.Remove(*family_); }

  void Start() {
    stopped_ = false;
    Poll();
  }

  void PollNow() {
    if (!stopped_) Poll();  // re-arming the timer cancels its pending wait
  }

  void Stop() {
    stopped_ = true;
    timer_.cancel();
    for (State& s : state_) {
      if (s.call) s.call->Cancel();
      s.call.reset();
    }
  }

  const std::vector<ServiceRef>& refs() const { return refs_; }

 private:
  struct State {
    std::shared_ptr<ApiClient::Call> call;  // the request in flight, if any
    std::optional<ServiceLocality> locality;
    prometheus::Gauge* series = nullptr;
  };

  void Poll() {
    duty_ = !on_duty_ || on_duty_();
    for (std::size_t i = 0; i < refs_.size(); ++i) {
      if (!duty_) {
        Set(i, std::nullopt);  // other Pods export it now; an answer in flight is dropped
      } else if (!state_[i].call) {
        GetService(i);  // a request still in flight is not doubled
      }
    }
    timer_.expires_after(interval_);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec && !self->stopped_) self->Poll();
    });
  }

  void GetService(std::size_t i) {
    const ServiceRef& ref = refs_[i];
    state_[i].call =
        client_->Get(ServicePath(ref.namespace_name, ref.name),
                     [self = shared_from_this(), i](ApiResponse r) { self->OnService(i, r); });
  }

  void OnService(std::size_t i, const ApiResponse& r) {
    state_[i].call.reset();
    if (stopped_ || !duty_) return;
    const ServiceRef& ref = refs_[i];
    std::string reason = FailureReason(r);
    std::string detail;
    std::optional<ServiceLocality> locality;
    if (reason.empty()) {
      json service = json::parse(r.body, nullptr, false);
      topology::TextRepairs repairs;
      locality = ReadServiceLocality(service, &detail, &repairs);
      metrics_.Sanitized("services", repairs);
      if (!locality) reason = "bad_response";
    } else {
      detail = Describe(r);  // parses a Status body: only for a failure
    }
    if (!reason.empty()) {
      metrics_.Error("services", reason);
      spdlog::debug("service info {}: GET service {}/{}: {}", ref.target, ref.namespace_name,
                    ref.name, Failure(reason, r, detail));
      if (reason == "not_found") Set(i, std::nullopt);  // nothing is asked of a Service gone
      return;
    }
    state_[i].call = client_->Get(EndpointSlicesPath(ref.namespace_name, ref.name),
                                  [self = shared_from_this(), i, loc = *locality](ApiResponse r) {
                                    self->OnSlices(i, loc, r);
                                  });
  }

  void OnSlices(std::size_t i, ServiceLocality locality, const ApiResponse& r) {
    state_[i].call.reset();
    if (stopped_ || !duty_) return;
    std::string reason = FailureReason(r);
    json list;
    if (reason.empty()) {
      list = json::parse(r.body, nullptr, false);
      if (list.is_discarded() || !list.is_object()) reason = "bad_response";
    }
    if (!reason.empty()) {
      metrics_.Error("service_endpointslices", reason);
      const ServiceRef& ref = refs_[i];
      spdlog::debug("service info {}: list endpointslices of {}/{}: {}", ref.target,
                    ref.namespace_name, ref.name, Failure(reason, r, Describe(r)));
      // The Service itself was read: keep what is known of the hints.
      locality.zone_hints = state_[i].locality && state_[i].locality->zone_hints;
    } else {
      locality.zone_hints = SlicesHaveZoneHints(list);
    }
    Set(i, locality);
  }

  void Set(std::size_t i, const std::optional<ServiceLocality>& locality) {
    State& s = state_[i];
    if (s.locality == locality) return;
    if (s.series) family_->Remove(s.series);
    s.series = nullptr;
    s.locality = locality;
    if (!locality) return;
    const ServiceRef& ref = refs_[i];
    s.series = &family_->Add({{"service", ref.target},
                              {"service_namespace", ref.namespace_name},
                              {"service_name", ref.name},
                              {"traffic_distribution", locality->traffic_distribution},
                              {"internal_traffic_policy", locality->internal_traffic_policy},
                              {"zone_hints", locality->zone_hints ? "true" : "false"}},
                             1.0);  // born at 1: a scrape (another thread) never sees it at 0
    spdlog::info(
        "service info {}: {}/{} trafficDistribution={} internalTrafficPolicy={} zone hints={}",
        ref.target, ref.namespace_name, ref.name, locality->traffic_distribution,
        locality->internal_traffic_policy, locality->zone_hints);
  }

  std::unique_ptr<ApiClient> client_;
  std::vector<ServiceRef> refs_;
  std::chrono::milliseconds interval_;
  prometheus::Registry& registry_;
  DiscoveryMetrics& metrics_;
  std::function<bool()> on_duty_;  // nullptr: always on duty
  boost::asio::steady_timer timer_;
  prometheus::Family<prometheus::Gauge>* family_ = nullptr;
  std::vector<State> state_;
  bool stopped_ = true;
  bool duty_ = true;  // on_duty_'s answer at the last poll
};

ServiceInfoPoller::ServiceInfoPoller(boost::asio::io_context& io, std::unique_ptr<ApiClient> client,
                                     std::vector<ServiceRef> refs,
                                     std::chrono::milliseconds interval,
                                     prometheus::Registry& registry, DiscoveryMetrics& metrics,
                                     std::function<bool()> on_duty)
    : impl_(std::make_shared<Impl>(io, std::move(client), std::move(refs), interval, registry,
                                   metrics, std::move(on_duty))) {}

ServiceInfoPoller::~ServiceInfoPoller() {
  Stop();
  impl_->RemoveFamily();
}

void ServiceInfoPoller::Start() { impl_->Start(); }
void ServiceInfoPoller::PollNow() { impl_->PollNow(); }
void ServiceInfoPoller::Stop() { impl_->Stop(); }
const std::vector<ServiceRef>& ServiceInfoPoller::refs() const { return impl_->refs(); }

}  // namespace podnet::discovery::kubernetes
