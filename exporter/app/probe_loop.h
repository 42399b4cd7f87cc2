#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exporter/app/loop_thread.h"
#include "exporter/config/config.h"
#include "exporter/discovery/kubernetes/discovery.h"
#include "exporter/metrics/metrics.h"
#include "exporter/probes/probe.h"
#include "exporter/probes/registry.h"
#include "exporter/responders/prober_tally.h"
#include "exporter/scheduler/scheduler.h"
#include "exporter/topology/compose.h"
#include "exporter/topology/topology.h"

namespace podnet::app {

/// The probe loop (docs/design.md, "Thread model"): the scheduler, every probe and the state
/// they are built from — the applied configuration, the effective self, the running peers, the
/// last discovery snapshot and the cluster DNS servers. Other threads reach it only through
/// the methods below, each of which posts to the loop. A configuration and a discovery change
/// take the same path there (Reconcile): compose the peers (static ones, then the selected
/// Kubernetes ones), diff against the running peers, start and stop only what changed.
class ProbeLoop {
 public:
  /// What the responders learn from the probe loop; each is called on the probe loop.
  struct ResponderHooks {
    /// The effective self (Pod name, node, zone) was set or changed (the responders answer
    /// with it).
    std::function<void(const topology::Self& self)> identity;
    /// Every probe Pod (discovered ones, this Pod included, and the static peers) with its
    /// zone and path class to this Pod, after each Reconcile: the sources the burst responder
    /// admits and the probers the coverage tally counts.
    std::function<void(std::vector<responders::KnownProber>)> probe_pods;
  };
  /// What every probe kind goes through before the scheduler gets it (App::BoundedRun::wrap).
  using Wrap =
      std::function<std::shared_ptr<probes::ProbeKind>(std::shared_ptr<probes::ProbeKind>)>;

  ProbeLoop(metrics::Metrics& metrics, ResponderHooks responders);
  ~ProbeLoop();

  /// Before Start(): every kind goes through `wrap`.
  void SetWrap(Wrap wrap) { wrap_ = std::move(wrap); }
  /// What sees every discovered probe Pod list (App::BoundedRun::discovered).
  using DiscoveredHook = std::function<void(const std::vector<topology::Peer>&)>;
  /// Before Start(): `hook` gets, on the loop, each Reconcile's discovered Pods.
  void SetDiscoveredHook(DiscoveredHook hook) { on_discovered_ = std::move(hook); }
  /// Runs the loop on its thread; Join() stops it and waits. Stop() is thread-safe.
  void Start() { thread_.Start(); }
  void Stop() { io_.stop(); }
  void Join() { thread_.Join(); }

  // Thread-safe: each posts to the probe loop.
  /// Runs `start` on the loop once it turns (App::BoundedRun::start).
  void PostStart(std::function<void(boost::asio::io_context&)> start);
  /// Applies a validated configuration.
  void Apply(std::shared_ptr<const config::Config> next);
  /// A snapshot of the peers' Kubernetes discovery; the peers follow it.
  void Discovered(discovery::kubernetes::Snapshot snapshot);
  /// The peers' discovery watches another Service: its snapshot is forgotten until the next.
  void DiscoveryRestarted();
  /// Kubernetes discovery is off: its snapshot is forgotten and the peers follow.
  void DiscoveryOff();
  /// The cluster DNS watch's endpoints (empty when it stops).
  void DnsEndpoints(std::vector<discovery::kubernetes::Endpoint> endpoints);

 private:
  // The one path from (configuration, discovery snapshot) to running probes.
  void Reconcile(std::shared_ptr<const config::Config> next);
  // The discovered probe Pods as peers of `self`, named after their nodes (ProbePeersOf, with
  // next's ports), self included; empty before the first list succeeded or without
  // peers.kubernetes.
  std::vector<topology::Peer> Discovered(const topology::Self& self,
                                         const config::Config& next) const;
  // ResponderHooks::probe_pods' list: the static peers of `next`, then every ready endpoint of
  // the last synced snapshot with peers.kubernetes (self included, and both Pods of a node
  // during a rollout, where Discovered() keeps one), classified from `self`.
  std::vector<responders::KnownProber> ProbePods(const config::Config& next,
                                                 const topology::Self& self) const;
  // The peers of `self` under `next` (topology::ComposePeers): the static ones and the
  // `discovered` endpoints (Discovered) as candidates.
  topology::Composition PeersFor(const topology::Self& self, const config::Config& next,
                                 std::vector<topology::Peer> discovered) const;
  // Every kind restarted for `next` and `self` towards `peers` (the series' labels changed).
  void RestartKinds(const config::Config& next, const topology::Self& self,
                    const std::vector<topology::Peer>& peers);
  // The peers' diff applied, and the kinds whose options changed restarted.
  void UpdateKinds(const config::Config* prev, const config::Config& next,
                   const std::vector<topology::Peer>& peers);
  void LogProbing(std::size_t candidates, std::size_t selected) const;
  // probe_env_.dns_servers from the cluster DNS watch's endpoints, classified from self_ and
  // capped by probes.dns.cluster_dns.max_servers (topology::SpreadOverZones).
  void UpdateDnsServers();
  // `entry`'s kind for `c` (nullptr when off), through wrap_ when set.
  std::shared_ptr<probes::ProbeKind> MakeKind(const probes::ProbeKindEntry& entry,
                                              const config::Config& c);

  boost::asio::io_context io_;
  LoopThread thread_{io_, runtime::Loop::kProbe, "probe"};
  ResponderHooks responders_;
  Wrap wrap_;
  DiscoveredHook on_discovered_;
  scheduler::SchedulerMetrics scheduler_metrics_;
  probes::ProbeEnv probe_env_;
  scheduler::Scheduler scheduler_;
  std::shared_ptr<const config::Config> applied_;
  std::vector<topology::Peer> peers_;
  std::vector<responders::KnownProber> probe_pods_;  // as last sent to the responders
  topology::Self self_;  // effective: config's self, zone from the Node when the config has none
  discovery::kubernetes::Snapshot discovered_;  // last snapshot posted by discovery
  std::vector<discovery::kubernetes::Endpoint> dns_discovered_;  // by the cluster DNS watch
};

}  // namespace podnet::app
