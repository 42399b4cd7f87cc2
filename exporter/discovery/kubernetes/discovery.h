#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <spdlog/common.h>

#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "exporter/discovery/kubernetes/api_client.h"
#include "exporter/discovery/kubernetes/resources.h"

namespace podnet::discovery::kubernetes {

/// The discovery series, registered while peers.kubernetes is configured (a reload that
/// restarts the discovery keeps them; one that turns it off removes them, the destructor does):
///  - podnet_kubernetes_api_errors_total{resource, reason}: failed API requests and watch
///    streams; resource ∈ node | endpointslices (the peers' Service) | dns_endpointslices (the
///    cluster DNS Service's, DiscoveryOptions::resource) | services and service_endpointslices
///    (ServiceInfoPoller), reason ∈ ApiErrorName ∪ StatusReason ∪
///    watch_error (an ERROR event other than 410) ∪ watch_closed (a watch the server ended at
///    once without events) ∪ no_zone_label (the Node has none) ∪ unmanaged_slice (a slice
///    labelled with the Service's name that the EndpointSlice controller does not manage,
///    ignored: ControllerManaged; once per list item or watch event); an ERROR event with
///    code 410 counts as gone;
///  - podnet_kubernetes_watch_events_total{resource, type}: type ∈ ADDED | MODIFIED | DELETED |
///    BOOKMARK | ERROR, resource as above (the EndpointSlice watches only);
///  - podnet_kubernetes_lists_total{resource}: successful EndpointSlice lists (1 + relists);
///  - podnet_discovery_candidates{source}: ready probe Pods in the Service (self included) after
///    the last list or watch event (the peers' watch only: DiscoveryOptions::count_candidates)
///    or DNS answer; source ∈ watch | dns, the running discovery's (SetSource);
///  - podnet_kubernetes_strings_sanitized_total{resource, reason}: strings of API answers that
///    were cut to their bound (reason truncated) or had control characters, NUL or invalid UTF-8
///    escaped (reason escaped) before they became labels or log text (resources.h: TextAt).
class DiscoveryMetrics {
 public:
  explicit DiscoveryMetrics(prometheus::Registry& registry);
  ~DiscoveryMetrics();  // removes the families from the registry
  DiscoveryMetrics(const DiscoveryMetrics&) = delete;
  DiscoveryMetrics& operator=(const DiscoveryMetrics&) = delete;

  void Error(std::string_view resource, std::string_view reason);
  void Event(std::string_view resource, std::string_view type);
  /// Counts what TextAt repaired in one answer of `resource`; logs it at warn, at most once a
  /// minute (an API server that sends such strings sends them in every answer).
  void Sanitized(std::string_view resource, const topology::TextRepairs& repairs);
  prometheus::Counter& lists(std::string_view resource);
  prometheus::Gauge& candidates() { return *candidates_; }
  /// podnet_discovery_candidates carries `source` from now on, with the value it had.
  void SetSource(std::string_view source);

 private:
  prometheus::Registry& registry_;
  prometheus::Family<prometheus::Counter>* errors_;
  prometheus::Family<prometheus::Counter>* events_;
  prometheus::Family<prometheus::Counter>* lists_family_;
  prometheus::Family<prometheus::Counter>* sanitized_;
  std::optional<std::chrono::steady_clock::time_point> last_sanitized_log_;
  prometheus::Family<prometheus::Gauge>* candidates_family_;
  prometheus::Gauge* candidates_;
};

/// Exponential backoff with jitter: the n-th delay is drawn uniformly from [d/2, d] with
/// d = min(max, initial × 2^n) ("equal jitter", so that a fleet of DaemonSet Pods that lost the
/// API server together does not come back in lockstep), and never less than a server's
/// Retry-After (itself capped at max_retry_after).
class Backoff {
 public:
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max,
          std::chrono::milliseconds max_retry_after);
  std::chrono::milliseconds Next(std::chrono::seconds retry_after = std::chrono::seconds(0));
  void Reset() { attempt_ = 0; }
  int attempt() const { return attempt_; }

 private:
  std::chrono::milliseconds initial_, max_, max_retry_after_;
  int attempt_ = 0;
  std::mt19937_64 rng_{std::random_device{}()};
};

/// The log level of the `failures`-th failure in a row (1-based): warn for the first of a streak
/// and every 10th, debug for the rest, so that a Pod that lost its API server or DNS says so
/// without a line per retry. Every discovery request logs its failures this way.
inline spdlog::level::level_enum FailureStreakLevel(int failures) {
  return failures == 1 || failures % 10 == 0 ? spdlog::level::warn : spdlog::level::debug;
}

/// At most one publish of a discovery's Snapshot per `interval`: the first change after a quiet
/// interval at once, the ones that follow it together at the interval's end
/// (DiscoveryOptions::min_publish_interval). `Clock` as BasicKubernetesDiscovery's. On its
/// io_context only.
template <typename Clock>
class PublishPacer {
 public:
  PublishPacer(boost::asio::io_context& io, std::chrono::milliseconds interval)
      : timer_(io), interval_(interval) {}
  /// True when the caller publishes now (`force`, or the interval has passed since the last
  /// Published()); else `later` runs at the interval's end, once however many requests come
  /// meanwhile, unless a Published() or Cancel() comes first. `later` keeps its owner alive.
  template <typename F>
  bool Due(bool force, F later) {
    if (force || Clock::now() - last_ >= interval_) return true;
    if (pending_) return false;
    pending_ = true;
    timer_.expires_at(last_ + interval_);
    timer_.async_wait([this, later = std::move(later)](boost::system::error_code ec) mutable {
      if (!ec && pending_) later();
    });
    return false;
  }
  /// A publish happened now: a pending one is dropped (it carried nothing more).
  void Published() {
    Cancel();
    last_ = Clock::now();
  }
  void Cancel() {
    pending_ = false;
    timer_.cancel();
  }

 private:
  boost::asio::basic_waitable_timer<Clock> timer_;
  std::chrono::milliseconds interval_;
  typename Clock::time_point last_{};
  bool pending_ = false;
};

struct DiscoveryOptions {
  std::string namespace_name;  // where the Service's EndpointSlices live
  std::string service;         // label kubernetes.io/service-name
  std::string node;            // self.node: whose zone to read
  bool want_zone = false;      // self.zone empty: read it from the Node
  /// The `resource` label of this watch's EndpointSlice errors, events and lists, so that two
  /// watches on one DiscoveryMetrics (the peers' and the cluster DNS's) count apart.
  std::string resource = "endpointslices";
  /// Whether this watch sets podnet_discovery_candidates (the peers' watch; not the DNS one).
  bool count_candidates = true;
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{60000};
  std::chrono::milliseconds max_retry_after{300000};
  /// timeoutSeconds asked of each watch is drawn from [min, 2 × min) (client-go's reflector
  /// does the same, so that watches of many clients do not all end together); the client's own
  /// deadline is that plus watch_grace.
  std::chrono::seconds min_watch_timeout{300};
  std::chrono::seconds watch_grace{30};
  /// Candidate changes are published at most once per interval: the first change after a
  /// quiet interval at once, the ones that follow it together at the interval's end (a
  /// rollout of a big DaemonSet sends hundreds of events a second, and each publish rebuilds
  /// and re-selects every candidate: ~6 ms at 5,000 nodes, bench/discovery_5000.sh). The
  /// own zone and the first list are published at once. 0 publishes every change.
  std::chrono::milliseconds min_publish_interval{1000};
};

/// What discovery knows: the own zone (once read) and the Service's candidates.
struct Snapshot {
  std::string self_zone;            // "" until read from the Node (or when not asked to)
  bool synced = false;              // the first list succeeded; `endpoints` is meaningful
  std::vector<Endpoint> endpoints;  // MergeSlices of the current slices (self included)
  /// The Service's UID, from the current slices' controller owner reference (ServiceUid; the
  /// smallest when they disagree, a Service recreated mid-watch); "" when none says.
  std::string service_uid;
};

/// What KubernetesWatches runs for the peers: an EndpointSlice watch (BasicKubernetesDiscovery)
/// or the Service's DNS records (DnsDiscovery, dns_discovery.h). Each calls its on_change with a
/// Snapshot whenever the zone or the candidates change. On its io_context only.
class PeerDiscovery {
 public:
  virtual ~PeerDiscovery() = default;
  virtual void Start() = 0;
  /// Cancels the requests in flight and the timers; no callback runs after it.
  virtual void Stop() = 0;
  /// The first list (or answer) succeeded (for /-/ready).
  virtual bool synced() const = 0;
  virtual const Snapshot& snapshot() const = 0;
  /// The last failure, as logged; "" before any.
  virtual const std::string& last_error() const = 0;
};

/// Kubernetes peer discovery on one io_context (the control loop; docs/design.md "Thread
/// model": the watch never runs on the probe loop). Follows the API's list-then-watch protocol
/// (https://kubernetes.io/docs/reference/using-api/api-concepts/, "Efficient detection of
/// changes" and "Watch bookmarks"; sig-architecture api-conventions.md, "Concurrency Control
/// and Consistency"):
///  1. GET /apis/discovery.k8s.io/v1/namespaces/NS/endpointslices
///     ?labelSelector=kubernetes.io/service-name=SVC&resourceVersion=LRV → the slices and the
///     list's metadata.resourceVersion; LRV as client-go's reflector sets it: "0" at first (the
///     API server answers from its watch cache, no etcd read), the last RV seen on a relist,
///     none (a quorum read) after a list answered 410 Gone;
///  2. GET the same with watch=1&resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=T;
///     each event (ADDED, MODIFIED, DELETED) replaces or removes one slice and moves RV on;
///     BOOKMARK only moves RV; the stream ending after T is renewed from RV at once;
///  3. 410 Gone — as the watch's HTTP status or an ERROR event with code 410 (RV too old, the
///     server compacted it) — lists again; any other ERROR event, a broken stream or an
///     undecodable event watches again from RV after a backoff (a broken event relists);
///  4. failures (network, 5xx, 429 with Retry-After, 401 after which the token is re-read) are
///     retried after Backoff; a success resets it.
/// When want_zone, GET /api/v1/nodes/NODE runs alongside, retried likewise until it answers.
/// `on_change` gets a Snapshot whenever the zone or the candidate set changes. Every failure is
/// counted in DiscoveryMetrics and logged at debug. Not thread-safe: use it on its loop.
///
/// `Clock` is the time backoff, Retry-After and publish coalescing wait by (its timers are
/// boost::asio::basic_waitable_timer<Clock>; the API client's own request deadlines stay on
/// steady_clock): std::chrono::steady_clock in the exporter (KubernetesDiscovery), a hand-moved
/// clock in tests. The definitions are in discovery_impl.h; discovery.cc instantiates the
/// steady_clock one.
template <typename Clock>
class BasicKubernetesDiscovery : public PeerDiscovery {
 public:
  BasicKubernetesDiscovery(boost::asio::io_context& io, std::unique_ptr<ApiClient> client,
                           DiscoveryOptions options, DiscoveryMetrics& metrics,
                           std::function<void(const Snapshot&)> on_change);
  ~BasicKubernetesDiscovery() override;  // Stop()s

  void Start() override;
  /// Cancels the requests in flight and the timers; no callback runs after it.
  void Stop() override;

  /// The first list succeeded (for /-/ready).
  bool synced() const override;
  const Snapshot& snapshot() const override;
  /// The last failed request, as logged ("endpointslices list: forbidden (HTTP 403): ...",
  /// "GET node n1: connect: Connection refused"); "" before any failure. Serving loop only.
  const std::string& last_error() const override;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

using KubernetesDiscovery = BasicKubernetesDiscovery<std::chrono::steady_clock>;
extern template class BasicKubernetesDiscovery<std::chrono::steady_clock>;

/// What a GET of the own Node (`node`) answered: its zone, logged at info; "" when the Node
/// has no topology.kubernetes.io/zone label (counted as no_zone_label, warned: peers stay in
/// path class unknown, not retried); std::nullopt with *reason (the `reason` label, not yet
/// counted) and *detail set on a failure to retry. Shared by the watch and DnsDiscovery.
std::optional<std::string> NodeZoneOf(const ApiResponse& r, const std::string& node,
                                      DiscoveryMetrics& metrics, std::string* reason,
                                      std::string* detail);

/// The paths of the list request and of the Node GET (names percent-encoded). A list at a
/// `resource_version` ("0": any the watch cache holds) adds &resourceVersion=; empty: none.
std::string EndpointSlicesPath(const std::string& namespace_name, const std::string& service,
                               std::string_view resource_version = {});
std::string NodePath(const std::string& node);
/// The path of a Service GET (core/v1; names percent-encoded).
std::string ServicePath(const std::string& namespace_name, const std::string& name);

}  // namespace podnet::discovery::kubernetes
