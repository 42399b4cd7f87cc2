#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "exporter/metrics/families.h"
#include "exporter/topology/topology.h"

namespace podnet::metrics {

/// Which labels name the peer in a peer series (metrics.aggregate_peers picks one).
enum class PeerLabelSet {
  /// source_node, source_zone, peer, peer_node, peer_zone, path_class: one series per peer.
  kPerPeer,
  /// source_node, source_zone, peer_zone, path_class: `peer` and `peer_node` aggregated away, so
  /// all peers of one zone and path class share one series per metric (bounds cardinality on big
  /// clusters). Under it, per metric type:
  ///  - counters and histograms sum over the peers that feed the series (a peer that goes keeps
  ///    its past counts in the sum; the series stays monotonic while any peer still feeds it);
  ///  - "last value" gauges (podnet_burst_throughput_bytes_per_second, _tcp_rtt_seconds,
  ///    _snd_cwnd_bytes, _interval_min_throughput_bytes_per_second, _path_mtu_bytes) hold the
  ///    value of whichever peer of the group wrote last: last writer wins, no averaging.
  kAggregated,
};

/// The labels of one peer's series (docs/design.md, "Metrics: peer labels and buckets"): the
/// only place that decides the label set.
/// kPerPeer: source_node, source_zone, peer, peer_node, peer_zone, path_class; kAggregated: the
/// same without peer and peer_node.
prometheus::Labels PeerLabels(const topology::Self& self, const topology::Peer& peer,
                              PeerLabelSet set);

/// Users per series, shared by every SeriesSet of one registry: a series that several
/// SeriesSets feed (aggregated peers; the dns probe's targets sharing {probe="dns"}) is removed
/// from its family when the last of them lets go. Keyed by the series' address, which is
/// unique while the series lives. Thread-safe. Shared (std::shared_ptr) by the sets, so that a
/// set destroyed after its Metrics (a probe held by a pending handler) is still safe.
class SeriesRefs {
 public:
  /// Users of `series` now (0 when none): for tests and checks.
  std::size_t users(const void* series) const;

 private:
  friend class SeriesSet;
  mutable std::mutex mu_;  // held across Family::Add/Remove and the count, so they agree
  std::unordered_map<const void*, std::size_t> users_;
};

/// The series one probe created for one peer (or one target), so that removing it removes
/// exactly the series no other set still uses (prometheus-cpp Family::Remove on the last user,
/// counted in a SeriesRefs).
class SeriesSet {
 public:
  explicit SeriesSet(std::shared_ptr<SeriesRefs> refs) : refs_(std::move(refs)) {}
  SeriesSet(const SeriesSet&) = delete;
  SeriesSet& operator=(const SeriesSet&) = delete;
  /// Lets go of its series without removing any (a restart or shutdown must not drop them):
  /// a series nobody uses any more stays exposed until a later set adds and removes it.
  ~SeriesSet();

  /// Family::Add, counted once per set. Returns the (possibly existing, possibly shared)
  /// series for these labels.
  template <typename T, typename... Args>
  T& Add(prometheus::Family<T>& family, const prometheus::Labels& labels, Args&&... args) {
    std::lock_guard lock(refs_->mu_);
    T& metric = family.Add(labels, std::forward<Args>(args)...);
    Track(&metric, [&family, &metric] { family.Remove(&metric); });
    return metric;
  }
  /// Add for a histogram, with the bucket layout its family was declared with, and its native
  /// buckets when the family has them (removed with the classic series).
  HistogramSeries Add(const HistogramFamily& histogram, const prometheus::Labels& labels);

  /// Lets go of every series added through this set; removes from its family each series of
  /// which this set was the last user.
  void RemoveAll();

  /// Lets go of one series added through this set (what Add returned), removing it from its
  /// family when this set was its last user. A series this set does not hold is ignored.
  void Remove(const void* series);

  /// Number of distinct series this set uses.
  std::size_t size() const { return removers_.size(); }

 private:
  struct Entry {
    const void* series;
    std::function<void()> remove;
  };
  void Release(bool remove);
  // Counts `series` once for this set (a counter bumped through Add on every failure must not
  // grow it), with what removes it from its family. refs_->mu_ held.
  void Track(const void* series, std::function<void()> remove);

  std::shared_ptr<SeriesRefs> refs_;
  std::vector<Entry> removers_;
  std::set<const void*> added_;
};

/// The registry and the families shared by all probes. Thread-safe as prometheus-cpp is:
/// probes update series on the probe loop while /metrics collects on the control loop.
class Metrics {
 public:
  Metrics();

  prometheus::Registry& registry() { return *registry_; }

  /// The families the configuration turns off (metrics.families), by name: Declare* puts a
  /// family of these in a registry that is never served. Families declared before keep their
  /// registry, so the probe kinds must be rebuilt after a change (the probe loop does). Probe
  /// loop only, as Declare*.
  void SetFamiliesOff(std::set<std::string, std::less<>> names) {
    families_off_ = std::move(names);
  }
  /// metrics.native_histograms: histogram families declared from now on give their series
  /// native buckets too (DeclareHistogram). As SetFamiliesOff, the probe kinds must be rebuilt
  /// after a change. Probe loop only.
  void SetNativeHistograms(bool on) { native_on_ = on; }
  bool native_histograms_on() const { return native_on_; }
  /// The native buckets of every series that has them (the protobuf exposition reads them).
  const std::shared_ptr<NativeHistograms>& native_histograms() const { return native_; }
  /// Where the series of histogram family `family` keep native buckets under the current
  /// setting: native_histograms() when on; when off, null, and the family's native series left
  /// from before are dropped (RemoveFamily). The one on/off decision for every histogram
  /// (DeclareHistogram, the scheduler's start delay).
  std::shared_ptr<NativeHistograms> NativeStoreFor(std::string_view family) const {
    if (native_on_) return native_;
    native_->RemoveFamily(family);
    return nullptr;
  }

  /// Where Declare* registers the family `name`: registry(), or the unserved one when it is off.
  /// Records the name (declared()).
  prometheus::Registry& RegistryFor(std::string_view name) {
    bool off = families_off_.contains(name);
    declared_.insert_or_assign(std::string(name), !off);
    return off ? *unserved_ : *registry_;
  }
  /// Every family declared through Declare* so far, by name: whether it is served (not off).
  /// prometheus-cpp's Collect leaves out a family without series, so this is the one list of
  /// what the probe kinds declare (tests hold the metrics.families catalog to it).
  const std::map<std::string, bool, std::less<>>& declared() const { return declared_; }

  /// How a /metrics body is encoded (HTTP Content-Encoding).
  enum class Encoding { kIdentity, kGzip };
  /// The exposition format of a /metrics body (negotiated by the scraper's Accept).
  enum class Format { kText, kProtobuf };

  /// The text exposition format (version 0.0.4) of everything registered plus the standard
  /// process_* metrics (process.h): prometheus-cpp's Collect, written by TextWriter
  /// (exposition.h: TextSerializer's text, `le` bounds shortest) in 64 KiB pieces of whole
  /// lines straight into the body, so no second full copy of the text exists. kGzip: the body
  /// is one gzip member (RFC 1952, zlib level 1, the text never held whole); kIdentity: the
  /// text, in one string reserved at the previous scrape's size. Never on the responder loop.
  /// kProtobuf: the same families in the protobuf exposition format instead (protobuf.h:
  /// delimited io.prometheus.client.MetricFamily messages), gzip or not the same way, with the
  /// native buckets of the series that have them (snapshotted before the classic ones are
  /// collected). Text has no place for native buckets: it carries the classic ones only.
  std::string Serialize(Encoding encoding = Encoding::kIdentity,
                        Format format = Format::kText) const;

  /// The users of each series, for every SeriesSet fed from this registry.
  const std::shared_ptr<SeriesRefs>& series_refs() { return series_refs_; }

  /// Sets podnet_peers{path_class} from the current peer list (every path class, zeros included).
  void SetPeers(const std::vector<topology::Peer>& peers);

  /// Records a configuration (re)load outcome; `now_seconds` is Unix time.
  void SetReloadOutcome(bool ok, double now_seconds);

  prometheus::Family<prometheus::Counter>& probe_errors() { return *probe_errors_; }
  prometheus::Family<prometheus::Counter>& probe_sent_bytes() { return *probe_sent_bytes_; }
  prometheus::Family<prometheus::Counter>& probe_received_bytes() { return *probe_received_bytes_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Registry> unserved_ = std::make_shared<prometheus::Registry>();
  std::set<std::string, std::less<>> families_off_;
  std::map<std::string, bool, std::less<>> declared_;
  std::shared_ptr<SeriesRefs> series_refs_ = std::make_shared<SeriesRefs>();
  bool native_on_ = false;
  std::shared_ptr<NativeHistograms> native_ = std::make_shared<NativeHistograms>();
  // Of the last identity body (bytes), per Format.
  mutable std::atomic<std::size_t> last_size_[2] = {0, 0};
  prometheus::Gauge* reload_successful_;
  prometheus::Gauge* reload_success_timestamp_;
  prometheus::Family<prometheus::Gauge>* peers_;
  prometheus::Family<prometheus::Counter>* probe_errors_;
  prometheus::Family<prometheus::Counter>* probe_sent_bytes_;
  prometheus::Family<prometheus::Counter>* probe_received_bytes_;
};

}  // namespace podnet::metrics
