#include "exporter/metrics/metrics.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "exporter/metrics/exposition.h"
#include "exporter/metrics/process.h"
#include "exporter/metrics/protobuf.h"
#include "exporter/runtime/loop_role.h"
#include "podnet/version.h"

namespace podnet::metrics {

prometheus::Labels PeerLabels(const topology::Self& self, const topology::Peer& peer,
                              PeerLabelSet set) {
  prometheus::Labels labels{
      {"source_node", self.node},
      {"source_zone", self.zone},
      {"peer_zone", peer.zone},
      {"path_class", std::string(topology::PathClassName(peer.path))},
  };
  if (set == PeerLabelSet::kPerPeer) {
    labels.emplace("peer", peer.name);
    labels.emplace("peer_node", peer.node);
  }
  return labels;
}

std::size_t SeriesRefs::users(const void* series) const {
  std::lock_guard lock(mu_);
  auto it = users_.find(series);
  return it == users_.end() ? 0 : it->second;
}

HistogramSeries SeriesSet::Add(const HistogramFamily& histogram, const prometheus::Labels& labels) {
  std::lock_guard lock(refs_->mu_);
  prometheus::Histogram& metric = histogram.family.Add(labels, histogram.buckets);
  std::shared_ptr<NativeHistogram> native;
  if (histogram.native) native = histogram.native->Add(histogram.name, labels);
  Track(&metric, [&family = histogram.family, &metric, store = histogram.native,
                  name = histogram.name, labels] {
    family.Remove(&metric);
    if (store) store->Remove(name, labels);
  });
  return {&metric, std::move(native)};
}

void SeriesSet::Track(const void* series, std::function<void()> remove) {
  if (!added_.insert(series).second) return;
  ++refs_->users_[series];
  removers_.push_back({series, std::move(remove)});
}

SeriesSet::~SeriesSet() { Release(/*remove=*/false); }

void SeriesSet::RemoveAll() { Release(/*remove=*/true); }

void SeriesSet::Remove(const void* series) {
  std::lock_guard lock(refs_->mu_);
  if (added_.erase(series) == 0) return;
  auto entry = std::find_if(removers_.begin(), removers_.end(),
                            [series](const Entry& e) { return e.series == series; });
  if (entry == removers_.end()) return;  // not reached: added_ and removers_ agree
  auto it = refs_->users_.find(series);
  if (it != refs_->users_.end() && --it->second == 0) {
    refs_->users_.erase(it);
    entry->remove();
  }
  removers_.erase(entry);
}

void SeriesSet::Release(bool remove) {
  std::lock_guard lock(refs_->mu_);
  for (auto& entry : removers_) {
    auto it = refs_->users_.find(entry.series);
    if (it == refs_->users_.end()) continue;  // not reached: every entry was counted
    if (--it->second > 0) continue;           // another set still feeds it
    refs_->users_.erase(it);
    if (remove) entry.remove();
  }
  removers_.clear();
  added_.clear();
}

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::BuildGauge()
      .Name("podnet_build_info")
      .Help(
          "A metric with a constant '1' value labelled by the version and revision of "
          "podnet-exporter.")
      .Register(*registry_)
      .Add({{"version", kVersion}, {"revision", kRevision}})
      .Set(1);
  reload_successful_ = &prometheus::BuildGauge()
                            .Name("podnet_config_last_reload_successful")
                            .Help("Whether the last configuration reload attempt was successful.")
                            .Register(*registry_)
                            .Add({});
  reload_success_timestamp_ = &prometheus::BuildGauge()
                                   .Name("podnet_config_last_reload_success_timestamp_seconds")
                                   .Help("Timestamp of the last successful configuration reload.")
                                   .Register(*registry_)
                                   .Add({});
  peers_ = &prometheus::BuildGauge()
                .Name("podnet_peers")
                .Help("Number of peers this probe Pod probes, by path class.")
                .Register(*registry_);
  for (auto p : topology::kAllPathClasses) {
    peers_->Add({{"path_class", std::string(topology::PathClassName(p))}});
  }
  probe_errors_ = &prometheus::BuildCounter()
                       .Name("podnet_probe_errors_total")
                       .Help("Probe failures, by probe kind and reason.")
                       .Register(*registry_);
  probe_sent_bytes_ = &prometheus::BuildCounter()
                           .Name("podnet_probe_sent_bytes_total")
                           .Help(
                               "Bytes the prober sent to a peer (IP headers included), by probe "
                               "kind: the input of the cost model.")
                           .Register(*registry_);
  probe_received_bytes_ = &prometheus::BuildCounter()
                               .Name("podnet_probe_received_bytes_total")
                               .Help(
                                   "Bytes the prober received from a peer (IP headers included), "
                                   "by probe kind.")
                               .Register(*registry_);
}

namespace {

// The body of one scrape: the text as it comes (in one string reserved at the previous
// scrape's size), or one gzip member (RFC 1952, zlib level 1) fed piece by piece, so the text is
// never held whole. Level 1: the text is highly repetitive, so level 1 already shrinks it ~38x
// (1,000 peers) at a fraction of level 6's CPU (the scrape's latency is what is budgeted).
class Body {
 public:
  static constexpr std::size_t kRoom = 32 * 1024;  // deflate output per round

  Body(Metrics::Encoding encoding, std::size_t size_hint)
      : gzip_(encoding == Metrics::Encoding::kGzip) {
    if (gzip_) {
      // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
      ok_ = z_open_ = deflateInit2(&z_, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
      body_.reserve(size_hint / 8);
    } else {
      body_.reserve(size_hint + size_hint / 16);
    }
  }
  ~Body() {
    if (z_open_) deflateEnd(&z_);
  }
  Body(const Body&) = delete;
  Body& operator=(const Body&) = delete;

  void Append(std::string_view text) {
    if (gzip_) {
      Deflate(text, Z_NO_FLUSH);
    } else {
      body_.append(text);
    }
  }

  /// The body (empty if zlib failed).
  std::string Finish() {
    if (gzip_) {
      Deflate({}, Z_FINISH);
      if (!ok_) return {};
    }
    return std::move(body_);
  }

 private:
  // Bounded: each round either finishes or fills a fresh piece of output.
  void Deflate(std::string_view in, int flush) {
    if (!ok_) return;
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = static_cast<uInt>(in.size());
    const std::size_t max_rounds = 64 + 2 * (in.size() / kRoom);
    for (std::size_t round = 0; round < max_rounds; ++round) {
      std::size_t used = body_.size();
      body_.resize(used + kRoom);
      z_.next_out = reinterpret_cast<Bytef*>(body_.data() + used);
      z_.avail_out = static_cast<uInt>(kRoom);
      int rc = deflate(&z_, flush);
      body_.resize(used + kRoom - z_.avail_out);
      if (rc == Z_STREAM_ERROR) break;
      // zlib: output room left means all input was taken (deflate.c); Z_FINISH ends the member.
      if (flush == Z_FINISH ? rc == Z_STREAM_END : z_.avail_out != 0) return;
    }
    ok_ = false;
  }

  bool gzip_;
  bool ok_ = true;
  bool z_open_ = false;  // deflateInit2 succeeded: deflateEnd is owed
  z_stream z_{};
  std::string body_;
};

}  // namespace

std::string Metrics::Serialize(Encoding encoding, Format format) const {
  PODNET_DCHECK_NOT_LOOP(kResponder);  // a scrape must never delay what peers time
  // Native buckets first: a classic series collected after has counted at least as much.
  NativeHistograms::Snapshots native;
  if (format == Format::kProtobuf) native = native_->SnapshotAll();
  auto families = registry_->Collect();
  for (auto& f : CollectProcessMetrics()) families.push_back(std::move(f));
  auto& last_size = last_size_[format == Format::kProtobuf];
  Body buf(encoding, last_size.load(std::memory_order_relaxed));
  auto sink = [&buf](std::string_view piece) { buf.Append(piece); };
  if (format == Format::kProtobuf) {
    ProtobufWriter(sink).Write(families, native);
  } else {
    TextWriter(sink).Write(families);
  }
  std::string body = buf.Finish();
  if (encoding == Encoding::kIdentity) last_size.store(body.size(), std::memory_order_relaxed);
  return body;
}

void Metrics::SetPeers(const std::vector<topology::Peer>& peers) {
  std::map<topology::PathClass, int> counts;
  for (const auto& p : peers) ++counts[p.path];
  for (auto p : topology::kAllPathClasses) {
    peers_->Add({{"path_class", std::string(topology::PathClassName(p))}}).Set(counts[p]);
  }
}

void Metrics::SetReloadOutcome(bool ok, double now_seconds) {
  reload_successful_->Set(ok ? 1 : 0);
  if (ok) reload_success_timestamp_->Set(now_seconds);
}

}  // namespace podnet::metrics
