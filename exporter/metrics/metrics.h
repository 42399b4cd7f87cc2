#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "exporter/config/config.h"
#include "exporter/topology/topology.h"

namespace podnet::metrics {

/// The labels every peer series carries (DESIGN.md): source_node, source_zone, peer, peer_node,
/// peer_zone, path.
prometheus::Labels PeerLabels(const config::Self& self, const topology::Peer& peer);

/// The series one probe created for one peer, so that removing the peer removes exactly those
/// (prometheus-cpp Family::Remove). Not thread-safe: owned by the probe loop.
class SeriesSet {
 public:
  SeriesSet() = default;
  SeriesSet(const SeriesSet&) = delete;
  SeriesSet& operator=(const SeriesSet&) = delete;
  ~SeriesSet() = default;  // keeps the series: removal is explicit (a restart must not drop them)

  /// Family::Add, remembered. Returns the (possibly existing) series for these labels.
  template <typename T, typename... Args>
  T& Add(prometheus::Family<T>& family, const prometheus::Labels& labels, Args&&... args) {
    T& metric = family.Add(labels, std::forward<Args>(args)...);
    // Remembered once: a counter bumped through Add on every failure must not grow this set.
    if (added_.insert(&metric).second) {
      removers_.push_back([&family, &metric] { family.Remove(&metric); });
    }
    return metric;
  }

  /// Removes every series added through this set from its family.
  void RemoveAll();

  /// Number of distinct series remembered.
  std::size_t size() const { return removers_.size(); }

 private:
  std::vector<std::function<void()>> removers_;
  std::set<const void*> added_;
};

/// The registry and the families shared by all probes. Thread-safe as prometheus-cpp is:
/// probes update series on the probe loop while /metrics collects on the serving loop.
class Metrics {
 public:
  Metrics();

  prometheus::Registry& registry() { return *registry_; }

  /// The text exposition format (version 0.0.4) of everything registered.
  std::string Serialize() const;

  /// Sets podnet_peers{path} from the current peer list (every path class, zeros included).
  void SetPeers(const std::vector<topology::Peer>& peers);

  /// Records a configuration (re)load outcome; `now_seconds` is Unix time.
  void SetReloadOutcome(bool ok, double now_seconds);

  prometheus::Family<prometheus::Counter>& probe_errors() { return *probe_errors_; }
  prometheus::Family<prometheus::Counter>& probe_sent_bytes() { return *probe_sent_bytes_; }
  prometheus::Family<prometheus::Counter>& probe_received_bytes() {
    return *probe_received_bytes_;
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* reload_successful_;
  prometheus::Gauge* reload_success_timestamp_;
  prometheus::Family<prometheus::Gauge>* peers_;
  prometheus::Family<prometheus::Counter>* probe_errors_;
  prometheus::Family<prometheus::Counter>* probe_sent_bytes_;
  prometheus::Family<prometheus::Counter>* probe_received_bytes_;
};

}  // namespace podnet::metrics
