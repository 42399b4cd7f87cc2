#pragma once

// BasicKubernetesDiscovery's definitions, for the translation units that instantiate it:
// discovery.cc (std::chrono::steady_clock, the exporter's) and tests (a clock they move by
// hand).

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/basic_waitable_timer.hpp>
#include <map>
#include <nlohmann/json.hpp>

#include "exporter/discovery/kubernetes/discovery.h"

namespace podnet::discovery::kubernetes {

template <typename Clock>
class BasicKubernetesDiscovery<Clock>::Impl : public std::enable_shared_from_this<Impl> {
 public:
  using json = nlohmann::json;

  Impl(boost::asio::io_context& io, std::unique_ptr<ApiClient> client, DiscoveryOptions options,
       DiscoveryMetrics& metrics, std::function<void(const Snapshot&)> on_change)
      : client_(std::move(client)),
        options_(std::move(options)),
        metrics_(metrics),
        on_change_(std::move(on_change)),
        node_timer_(io),
        slices_timer_(io),
        pacer_(io, options_.min_publish_interval),
        node_backoff_(options_.initial_backoff, options_.max_backoff, options_.max_retry_after),
        slices_backoff_(options_.initial_backoff, options_.max_backoff, options_.max_retry_after) {}

  void Start() {
    stopped_ = false;
    metrics_.lists(options_.resource);  // 0 until the first list, so that a rate is not absent
    spdlog::info("kubernetes discovery: service {}/{} from API server {} ({})",
                 options_.namespace_name, options_.service, client_->config().Url(),
                 client_->config().source);
    if (options_.want_zone) GetNode();
    List();
  }

  void Stop() {
    stopped_ = true;
    if (node_call_) node_call_->Cancel();
    if (slices_call_) slices_call_->Cancel();
    node_call_.reset();
    slices_call_.reset();
    node_timer_.cancel();
    slices_timer_.cancel();
    pacer_.Cancel();
    if (options_.count_candidates) metrics_.candidates().Set(0);
  }

  const Snapshot& snapshot() const { return snapshot_; }
  const std::string& last_error() const { return last_error_; }

 private:
  // --- the own Node's zone ---------------------------------------------------------------

  void GetNode() {
    node_call_ =
        client_->Get(NodePath(options_.node),
                     [self = this->shared_from_this()](ApiResponse r) { self->OnNode(r); });
  }

  void OnNode(const ApiResponse& r) {
    node_call_.reset();
    if (stopped_) return;
    std::string reason, detail;
    if (auto zone = NodeZoneOf(r, options_.node, metrics_, &reason, &detail)) {
      if (zone->empty()) return;
      snapshot_.self_zone = *zone;
      Publish(true);
      return;
    }
    metrics_.Error("node", reason);
    auto delay = node_backoff_.Next(r.retry_after);
    last_error_ = "GET node " + options_.node + ": " + Failure(reason, r, detail);
    spdlog::log(FailureStreakLevel(node_backoff_.attempt()),
                "kubernetes: {}; retrying in {} ms (failure {})", last_error_, delay.count(),
                node_backoff_.attempt());
    node_timer_.expires_after(delay);
    node_timer_.async_wait([self = this->shared_from_this()](boost::system::error_code ec) {
      if (!ec && !self->stopped_) self->GetNode();
    });
  }

  // --- EndpointSlices: list, then watch ----------------------------------------------------

  // The resourceVersion a list asks for, as client-go's reflector does (relistResourceVersion):
  // "0" first (whatever the API server's watch cache holds: no read from etcd), then the last
  // one seen (a state no older than it, from the cache too); "" (the current state, a quorum
  // read from etcd) only after a list at a version answered that the version is gone or too
  // new for this server, until a list succeeds.
  // https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-get-and-list
  std::string ListResourceVersion() const {
    if (list_version_gone_) return "";
    return resource_version_.empty() ? "0" : resource_version_;
  }

  void List() {
    const std::string rv = ListResourceVersion();
    slices_call_ =
        client_->Get(EndpointSlicesPath(options_.namespace_name, options_.service, rv),
                     [self = this->shared_from_this()](ApiResponse r) { self->OnList(r); });
  }

  // What a list's body holds: its slices' ready endpoints and Service UIDs by slice name (the
  // EndpointSlice controller's only; others counted as Unmanaged) and its resourceVersion.
  struct Listed {
    std::map<std::string, std::vector<Endpoint>> slices;
    std::map<std::string, std::string> uids;
    std::string rv;
  };
  // Reads a list's body into *out; "" or the failure reason ("bad_response") with *detail.
  std::string ReadList(const std::string& body, Listed* out, std::string* detail,
                       topology::TextRepairs* repairs) {
    std::string reason;
    json list = json::parse(body, nullptr, false);
    if (list.is_discarded() || !list.is_object()) {
      reason = "bad_response";
      *detail = "the list is not a JSON object";
    } else {
      out->rv = ResourceVersion(list, repairs);
      const json* items = FieldAt(list, "items");
      if (out->rv.empty() || (items && !items->is_array() && !items->is_null())) {
        reason = "bad_response";
        *detail = "no metadata.resourceVersion or items is not an array";
      } else if (items && items->is_array()) {
        for (const auto& item : *items) {
          std::string err;
          auto eps = ReadyEndpoints(item, &err, repairs);
          if (!eps) {
            reason = "bad_response";
            *detail = err;
            break;
          }
          // After its shape: the API server validates a slice's shape on every write, so a
          // forged one is well-shaped; a badly shaped answer is the server's, as before.
          if (!ControllerManaged(item)) {
            Unmanaged(item, repairs);
            continue;
          }
          std::string name = ObjectName(item, repairs);
          out->slices[name] = std::move(*eps);
          out->uids[name] = ServiceUid(item, repairs);
        }
      }
    }
    return reason;
  }

  void OnList(const ApiResponse& r) {
    slices_call_.reset();
    if (stopped_) return;
    // As client-go's isExpiredError / isTooLargeResourceVersionError: the version asked for is
    // gone (410), or ahead of this API server's cache (504, cause ResourceVersionTooLarge). Only
    // a list that succeeds clears it: a failed quorum read must not go back to that version.
    if (r.error == ApiError::kNone &&
        (r.status == 410 ||
         (r.status == 504 && (r.body.find("ResourceVersionTooLarge") != std::string::npos ||
                              r.body.find("Too large resource version") != std::string::npos)))) {
      list_version_gone_ = true;
    }
    std::string reason = FailureReason(r);
    std::string detail = r.detail;
    Listed listed;
    topology::TextRepairs repairs;
    if (reason.empty()) reason = ReadList(r.body, &listed, &detail, &repairs);
    metrics_.Sanitized(options_.resource, repairs);
    if (!reason.empty()) {
      metrics_.Error(options_.resource, reason);
      RetrySlices(
          r.retry_after, [](Impl* self) { self->List(); },
          "list: " + Failure(reason, r, detail == r.detail ? Describe(r) : detail));
      return;
    }
    slices_ = std::move(listed.slices);
    slice_uids_ = std::move(listed.uids);
    resource_version_ = listed.rv;
    list_version_gone_ = false;
    metrics_.lists(options_.resource).Increment();
    // The backoff is reset by a watch that delivers, not by the list: a server that lists fine
    // but fails every watch at once must not get a tight list-watch loop.
    bool first = !snapshot_.synced;
    snapshot_.synced = true;
    spdlog::debug("kubernetes: listed {} EndpointSlices at resourceVersion {}", slices_.size(),
                  resource_version_);
    Publish(first);
    Watch();
  }

  void Watch() {
    std::uniform_int_distribution<long long> pick(options_.min_watch_timeout.count(),
                                                  2 * options_.min_watch_timeout.count() - 1);
    long long timeout_s = std::max<long long>(1, pick(rng_));
    std::string path = EndpointSlicesPath(options_.namespace_name, options_.service) +
                       "&watch=1&resourceVersion=" + resource_version_ +
                       "&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(timeout_s);
    watch_events_ = 0;
    watch_started_ = Clock::now();
    relist_ = false;
    watch_failure_.clear();
    auto deadline = std::chrono::seconds(timeout_s) + options_.watch_grace;
    slices_call_ = client_->Watch(
        path, deadline,
        [self = this->shared_from_this()](std::string_view line) { return self->OnEvent(line); },
        [self = this->shared_from_this()](ApiResponse r) { self->OnWatchEnd(r); });
  }

  // One watch event; false ends the stream (then OnWatchEnd decides what comes next).
  bool OnEvent(std::string_view line) {
    if (stopped_) return false;
    topology::TextRepairs repairs;
    bool go_on = ApplyEvent(line, repairs);
    metrics_.Sanitized(options_.resource, repairs);
    return go_on;
  }

  bool ApplyEvent(std::string_view line, topology::TextRepairs& repairs) {
    json event = json::parse(line, nullptr, false);
    // "" for a discarded (unparsable) event too
    std::string type = TextAt(event, "type", topology::kMaxLabelValueBytes, &repairs);
    const json* object = ObjectAt(event, "object");
    if (type.empty() || !object) {
      watch_failure_ = "bad_response";
      relist_ = true;  // an event we could not read may have been a change: start over
      spdlog::debug("kubernetes: undecodable watch event ({} bytes)", line.size());
      return false;
    }
    if (type == "ERROR") {
      // The object is a metav1.Status; code 410 (reason Expired or Gone) = RV too old.
      metrics_.Event(options_.resource, type);
      long long code = IntegerAt(*object, "code").value_or(0);
      relist_ = code == 410;
      watch_failure_ = code == 410 ? "gone" : "watch_error";
      spdlog::debug("kubernetes: watch ERROR event: code {} {}", code,
                    TextAt(*object, "message", topology::kMaxMessageBytes, &repairs));
      return false;
    }
    if (type != "ADDED" && type != "MODIFIED" && type != "DELETED" && type != "BOOKMARK") {
      watch_failure_ = "bad_response";
      relist_ = true;
      spdlog::debug("kubernetes: unknown watch event type {}", type);
      return false;
    }
    std::string rv = ResourceVersion(*object, &repairs);
    if (type != "BOOKMARK") {
      std::string err;
      auto eps = ReadyEndpoints(*object, &err, &repairs);
      if (!eps) {
        watch_failure_ = "bad_response";
        relist_ = true;
        spdlog::debug("kubernetes: bad {} event: {}", type, err);
        return false;
      }
      std::string name = ObjectName(*object, &repairs);
      bool gone = type == "DELETED";
      if (!gone && !ControllerManaged(*object)) {
        // Ignored like a listed one; a slice that lost the controller's label is gone.
        Unmanaged(*object, &repairs);
        gone = true;
      }
      if (gone) {
        slices_.erase(name);
        slice_uids_.erase(name);
      } else {
        slices_[name] = std::move(*eps);
        slice_uids_[name] = ServiceUid(*object, &repairs);
      }
    }
    metrics_.Event(options_.resource, type);
    ++watch_events_;
    if (!rv.empty()) resource_version_ = rv;
    if (type != "BOOKMARK") Publish(false);
    return true;
  }

  void OnWatchEnd(const ApiResponse& r) {
    slices_call_.reset();
    if (stopped_) return;
    std::string reason = watch_failure_;
    if (reason.empty()) reason = FailureReason(r);
    if (r.error == ApiError::kNone && r.status == 410) relist_ = true;
    if (reason.empty()) {
      // The server ended the watch at timeoutSeconds: renew it from where we are. A server
      // that ends watches at once and without events gets the backoff, not a tight loop.
      bool quick = Clock::now() - watch_started_ < std::chrono::seconds(1);
      if (watch_events_ > 0 || !quick) {
        slices_backoff_.Reset();
        Watch();
        return;
      }
      reason = "watch_closed";
    }
    metrics_.Error(options_.resource, reason);
    if (watch_events_ > 0) slices_backoff_.Reset();
    if (relist_) {
      spdlog::debug("kubernetes: watch from resourceVersion {} ended ({}): relisting",
                    resource_version_, reason);
      if (watch_events_ > 0 || slices_backoff_.attempt() == 0) {
        slices_backoff_.Next();  // the next failure in a row waits
        List();
        return;
      }
      RetrySlices(
          r.retry_after, [](Impl* self) { self->List(); }, "relist after " + reason);
      return;
    }
    RetrySlices(
        r.retry_after, [](Impl* self) { self->Watch(); },
        "watch: " + Failure(reason, r, Describe(r)));
  }

  void RetrySlices(std::chrono::seconds retry_after, void (*next)(Impl*), const std::string& why) {
    auto delay = slices_backoff_.Next(retry_after);
    last_error_ = "endpointslices " + why;
    spdlog::log(FailureStreakLevel(slices_backoff_.attempt()),
                "kubernetes: {}; retrying in {} ms (failure {})", last_error_, delay.count(),
                slices_backoff_.attempt());
    slices_timer_.expires_after(delay);
    slices_timer_.async_wait([self = this->shared_from_this(), next](boost::system::error_code ec) {
      if (!ec && !self->stopped_) next(self.get());
    });
  }

  // metadata.resourceVersion: opaque to clients, but sent back in the watch's URL and logged,
  // so bounded like a name (an etcd revision has at most 20 digits).
  static std::string ResourceVersion(const json& object, topology::TextRepairs* repairs) {
    const json* m = ObjectAt(object, "metadata");
    return m ? TextAt(*m, "resourceVersion", topology::kMaxLabelValueBytes, repairs) : "";
  }

  // A failure streak is logged at warn on its first failure and then every 10th (every
  // failure at debug): a Pod stuck NotReady on RBAC or credentials must say why at the default
  // log level, without a line per retry for as long as the API server is away.
  // A slice labelled with the Service's name that the EndpointSlice controller does not manage
  // (ControllerManaged): its endpoints are no probe Pods'; counted, logged at debug.
  void Unmanaged(const json& slice, topology::TextRepairs* repairs) {
    metrics_.Error(options_.resource, "unmanaged_slice");
    spdlog::debug("kubernetes: ignored EndpointSlice {} of {}: not managed by {}",
                  ObjectName(slice, repairs), options_.service, kEndpointSliceController);
  }

  void Publish(bool force) {
    // Coalesced: one publish at the end of the interval carries every change made in it.
    if (pacer_.Due(force, [self = this->shared_from_this()] {
          if (!self->stopped_) self->PublishNow(false);
        })) {
      PublishNow(force);
    }
  }

  void PublishNow(bool force) {
    pacer_.Published();
    auto endpoints = MergeSlices(slices_);
    std::string uid;
    for (const auto& [name, u] : slice_uids_) {
      if (!u.empty() && (uid.empty() || u < uid)) uid = u;
    }
    if (!force && endpoints == snapshot_.endpoints && uid == snapshot_.service_uid) return;
    snapshot_.endpoints = std::move(endpoints);
    snapshot_.service_uid = std::move(uid);
    if (snapshot_.synced && options_.count_candidates) {
      metrics_.candidates().Set(static_cast<double>(snapshot_.endpoints.size()));
    }
    if (on_change_) on_change_(snapshot_);
  }

  std::unique_ptr<ApiClient> client_;
  DiscoveryOptions options_;
  DiscoveryMetrics& metrics_;
  std::function<void(const Snapshot&)> on_change_;
  boost::asio::basic_waitable_timer<Clock> node_timer_;
  boost::asio::basic_waitable_timer<Clock> slices_timer_;
  PublishPacer<Clock> pacer_;  // a coalesced Publish (min_publish_interval)
  Backoff node_backoff_;
  Backoff slices_backoff_;
  std::mt19937_64 rng_{std::random_device{}()};
  std::shared_ptr<ApiClient::Call> node_call_;
  std::shared_ptr<ApiClient::Call> slices_call_;
  bool stopped_ = true;

  Snapshot snapshot_;
  std::map<std::string, std::vector<Endpoint>> slices_;  // by slice name
  std::map<std::string, std::string> slice_uids_;        // ServiceUid, by slice name
  std::string resource_version_;
  bool list_version_gone_ = false;  // a list's version was unavailable: read etcd till one works
  // The watch in flight.
  int watch_events_ = 0;
  typename Clock::time_point watch_started_;
  bool relist_ = false;
  std::string watch_failure_;  // set by OnEvent when it ends the stream
  std::string last_error_;     // the last failure's Failure() text, for /-/ready
};

template <typename Clock>
BasicKubernetesDiscovery<Clock>::BasicKubernetesDiscovery(
    boost::asio::io_context& io, std::unique_ptr<ApiClient> client, DiscoveryOptions options,
    DiscoveryMetrics& metrics, std::function<void(const Snapshot&)> on_change)
    : impl_(std::make_shared<Impl>(io, std::move(client), std::move(options), metrics,
                                   std::move(on_change))) {}

template <typename Clock>
BasicKubernetesDiscovery<Clock>::~BasicKubernetesDiscovery() {
  impl_->Stop();
}

template <typename Clock>
void BasicKubernetesDiscovery<Clock>::Start() {
  impl_->Start();
}
template <typename Clock>
void BasicKubernetesDiscovery<Clock>::Stop() {
  impl_->Stop();
}
template <typename Clock>
bool BasicKubernetesDiscovery<Clock>::synced() const {
  return impl_->snapshot().synced;
}
template <typename Clock>
const std::string& BasicKubernetesDiscovery<Clock>::last_error() const {
  return impl_->last_error();
}
template <typename Clock>
const Snapshot& BasicKubernetesDiscovery<Clock>::snapshot() const {
  return impl_->snapshot();
}

}  // namespace podnet::discovery::kubernetes
