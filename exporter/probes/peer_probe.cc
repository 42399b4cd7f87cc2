#include "exporter/probes/peer_probe.h"

#include <spdlog/spdlog.h>

#include "exporter/runtime/loop_role.h"

namespace podnet::probes {

PeerProbeBase::PeerProbeBase(ProbeEnv& env, std::string_view kind, topology::Peer peer,
                             prometheus::Labels labels,
                             std::optional<prometheus::Labels> histogram_labels)
    : env_(env),
      kind_(kind),
      peer_(std::move(peer)),
      labels_(std::move(labels)),
      probe_labels_(labels_),
      histogram_labels_(histogram_labels ? std::move(*histogram_labels) : labels_),
      series_(std::in_place, env.metrics.series_refs()) {
  probe_labels_["probe"] = kind_;
  byte_labels_ = probe_labels_;
}

PeerProbeBase::PeerProbeBase(ProbeEnv& env, std::string_view kind, const topology::Peer& peer)
    : PeerProbeBase(env, kind, peer, env.PeerLabels(peer), env.HistogramLabels(peer)) {
  byte_labels_ = metrics::PeerLabels(env.self, peer, metrics::PeerLabelSet::kAggregated);
  byte_labels_["probe"] = kind_;
}

std::pair<prometheus::Counter*, prometheus::Counter*> PeerProbeBase::AddByteCounters() {
  return {&series_->Add(env_.metrics.probe_sent_bytes(), byte_labels_),
          &series_->Add(env_.metrics.probe_received_bytes(), byte_labels_)};
}

void PeerProbeBase::Run(std::chrono::steady_clock::time_point scheduled,
                        std::function<void()> done) {
  PODNET_DCHECK_LOOP(kProbe);
  if (cancelled_) {
    done();
    return;
  }
  done_ = std::move(done);
  ++gen_;
  StartRound(scheduled);
}

void PeerProbeBase::Cancel() {
  cancelled_ = true;
  ++gen_;
  StopRound();
  EndRound();
}

void PeerProbeBase::RemoveSeries() {
  Cancel();
  DropSeries();
  series_.reset();
}

void PeerProbeBase::DropSeries() {
  if (series_) series_->RemoveAll();
  errors_.clear();
}

void PeerProbeBase::EndRound() {
  if (done_) std::exchange(done_, nullptr)();
}

void PeerProbeBase::CountError(std::string_view reason, std::string_view detail) {
  SPDLOG_DEBUG("{} probe error peer={} reason={} {}", kind_, peer_.name, reason, detail);
  if (!series_) return;
  auto it = errors_.find(reason);
  if (it == errors_.end()) {
    auto labels = probe_labels_;
    labels["reason"] = std::string(reason);
    it = errors_.emplace(reason, &series_->Add(env_.metrics.probe_errors(), labels)).first;
  }
  it->second->Increment();
}

}  // namespace podnet::probes
