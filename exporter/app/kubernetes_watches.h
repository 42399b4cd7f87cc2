#pragma once

#include <prometheus/registry.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exporter/app/probe_loop.h"
#include "exporter/config/config.h"
#include "exporter/discovery/kubernetes/api_client.h"
#include "exporter/discovery/kubernetes/auto_source.h"
#include "exporter/discovery/kubernetes/discovery.h"
#include "exporter/discovery/kubernetes/dns_discovery.h"
#include "exporter/discovery/kubernetes/service_info.h"

namespace podnet::app {

/// `discovery: auto`'s state (KubernetesWatches; the rule: discovery/kubernetes/auto_source.h).
/// At namespace scope: a nested struct's member initializers are not usable inside the class
/// that holds it in a std::optional (clang rejects its construction there).
struct AutoDiscoveryState {
  discovery::kubernetes::DnsDiscoveryOptions dns;            // what its DNS side asks
  std::size_t dns_from = 0;                                  // peers.kubernetes.auto_dns_from
  std::optional<discovery::kubernetes::PeerSource> decided;  // none: the first answer
  std::chrono::steady_clock::time_point since;               // of the decision, or of the start
  bool switching = false;                                    // a switch is posted
  // How long the watch is kept before the records are taken (again): kAutoDwell, doubled
  // each time the records were left within one (up to kAutoMaxDwell).
  std::chrono::steady_clock::duration dns_dwell = discovery::kubernetes::kAutoDwell;
};

/// Control loop only: what peers.kubernetes asks of the Kubernetes API, each a list-then-watch
/// or a poll on the control loop that posts what it finds to the probe loop:
///  - the peers' watch (the EndpointSlices of peers.kubernetes's Service, and the Node's zone
///    when self.zone is empty), or with `discovery: dns` the Service's DNS records
///    (DnsDiscovery, from resolv.conf's first nameserver as read at each Configure), or with
///    `discovery: auto` either, as the ready Pods they count say (AutoPeerSource: it starts
///    with the DNS records, switches on a synced snapshot, keeping the peers and readiness
///    through the switch as a reload does): every snapshot to ProbeLoop::Discovered;
///  - the cluster DNS Service's watch (probes.dns.cluster_dns): its endpoints to
///    ProbeLoop::DnsEndpoints. Its failures are counted and logged only: peers and /-/ready
///    never wait for it;
///  - the poller of what the service probe's Services ask for (podnet_service_info), on duty in
///    kServiceInfoPodsPerZone Pods of each zone (ServiceInfoDuty).
/// They share one DiscoveryMetrics, registered with the first peers.kubernetes and removed
/// when a reload turns it off: a Pod without Kubernetes discovery exports no
/// podnet_kubernetes_* series.
class KubernetesWatches {
 public:
  /// Where the API credentials come from: `kubeconfig` (--kubeconfig), else $KUBECONFIG (its
  /// first file), else the service account in `service_account_dir`. `on_sync_change` runs
  /// on the control loop when synced() may have changed.
  KubernetesWatches(boost::asio::io_context& io, std::optional<std::string> kubeconfig,
                    std::string service_account_dir, prometheus::Registry& registry,
                    ProbeLoop& probe, std::function<void()> on_sync_change);
  ~KubernetesWatches();

  /// Starts, restarts or stops each watch as `c` asks; one that `c` leaves as it is keeps
  /// running. False and *error when the credentials of one to start cannot be read (no
  /// in-cluster credentials, a bad kubeconfig): the running peers' and DNS watches are kept.
  bool Configure(const config::Config& c, std::string* error);
  /// Ends every call and timer (at shutdown); Release() then destroys them.
  void Stop();
  void Release();

  /// No peers' watch runs, or its first list succeeded.
  bool synced() const { return !unsynced_; }
  /// "" when synced(), else why not (for /-/ready's body).
  std::string NotSyncedReason() const;
  /// The zone the peers' watch read from the Node; "" without one.
  std::string self_zone() const;
  /// How long the peers may go on probing this Pod after it left their source: with the DNS
  /// records running, dns_refresh + 10 % (its jitter) + kDnsRecordTtl + 2 s (discovery's
  /// publish interval, and the endpoint's removal reaching CoreDNS); with the watch or no
  /// discovery, 0 (the watch's ~1 s is the drain flag's to cover). This Pod's source stands for
  /// its peers' (`auto` chooses alike across a fleet). The drain on SIGTERM lasts at least
  /// this long (ControlLoop).
  std::chrono::milliseconds PeersStaleness() const;
  /// What a cached answer of the Service's records may lag behind: CoreDNS's kubernetes
  /// plugin answers with TTL 5 s by default (its `ttl` option), and the stock Corefile's
  /// `cache 30` keeps an answer no longer than its TTL.
  static constexpr std::chrono::seconds kDnsRecordTtl{5};

 private:
  // Every watch stopped and the metrics removed (peers.kubernetes is off).
  void Off();
  // The cluster DNS watch replaced by one with `options` (none when nullopt).
  void ReplaceDnsWatch(const std::optional<discovery::kubernetes::DiscoveryOptions>& options,
                       std::unique_ptr<discovery::kubernetes::ApiClient> client);
  // The peers' watch replaced by one with `options` (DNS discovery with `dns`).
  void ReplacePeersWatch(const discovery::kubernetes::DiscoveryOptions& options,
                         const std::optional<discovery::kubernetes::DnsDiscoveryOptions>& dns,
                         std::unique_ptr<discovery::kubernetes::ApiClient> client);
  // A snapshot of the peer discovery: to the probe loop (with the carried zone while the new
  // discovery has not read its own), unless the kept peers wait for its first synced one.
  void OnPeersSnapshot(const discovery::kubernetes::Snapshot& snap);
  // Stops the cluster DNS watch (if any) and empties the DNS server list.
  void StopDnsWatch();
  // Polls what the service probe's Kubernetes Services ask for while a target names one.
  bool ConfigureServiceInfo(const config::Config& c, std::string* error);
  // Whether this Pod polls the probed Services now: one of the kServiceInfoPodsPerZone Pods of
  // its zone drawn for the duty in this kServiceInfoPeriod (topology::InZoneSample over the
  // peers' watch's Pods, keyed by its Service's UID, as the DNS sample): the fact is the same
  // for every Pod and the rule reads the max over Pods, so its API cost (2 requests a minute a
  // Pod on duty) need not grow with the nodes. False until the peers' watch has synced, and for
  // a Pod its watch does not list.
  bool ServiceInfoDuty() const;
  // An API client from the credentials; nullptr and *error when they cannot be read.
  std::unique_ptr<discovery::kubernetes::ApiClient> MakeApiClient(std::string* error);
  // `auto`'s timer: every kAutoTick, the running source is judged again (the discoveries
  // publish only when their Pods change), and one that has not synced within
  // kAutoFirstAnswerDeadline of its start gives way to the other.
  void ArmAutoTick();
  void AutoTick();
  // The source the running peers' discovery reads: the records (peers_dns_) or the watch.
  discovery::kubernetes::PeerSource RunningSource() const;
  static constexpr std::chrono::seconds kAutoTick{15};
  // Judges a synced snapshot of an `auto` discovery; a switch is posted, never made from
  // inside the discovery's own callback.
  void JudgeAuto(const discovery::kubernetes::Snapshot& snap);
  // The running `auto` discovery replaced by one from `to` (the peers kept through it).
  void SwitchAuto(discovery::kubernetes::PeerSource to, const std::string& why);

  boost::asio::io_context& io_;
  std::optional<std::string> kubeconfig_;
  std::string service_account_dir_;
  prometheus::Registry& registry_;
  ProbeLoop& probe_;
  std::function<void()> on_sync_change_;
  std::unique_ptr<discovery::kubernetes::DiscoveryMetrics> metrics_;  // outlives the watches
  std::optional<AutoDiscoveryState> auto_;
  boost::asio::steady_timer auto_tick_;  // every kAutoTick while `auto` runs
  std::uint64_t auto_generation_ = 0;    // a post for an older discovery does nothing
  // DNS discovery's series, while it runs; outlives it.
  std::unique_ptr<discovery::kubernetes::DnsDiscoveryMetrics> dns_metrics_;
  std::unique_ptr<discovery::kubernetes::PeerDiscovery> peers_;
  discovery::kubernetes::DiscoveryOptions peers_options_;  // of the running peers' watch
  // Of the running DNS discovery (nullopt: the watch).
  std::optional<discovery::kubernetes::DnsDiscoveryOptions> peers_dns_;
  std::unique_ptr<discovery::kubernetes::KubernetesDiscovery> dns_;
  discovery::kubernetes::DiscoveryOptions dns_options_;  // of the running DNS watch
  // What the probed Services ask for; destroyed before metrics_ (it counts there).
  std::unique_ptr<discovery::kubernetes::ServiceInfoPoller> service_info_;
  static constexpr std::chrono::seconds kServiceInfoInterval{60};
  static constexpr std::size_t kServiceInfoPodsPerZone = 2;
  static constexpr std::chrono::hours kServiceInfoPeriod{1};
  topology::Self service_info_self_;  // the configured self, read by ServiceInfoDuty
  bool peers_synced_ = false;         // the running peers' watch has sent a synced snapshot
  bool unsynced_ = false;             // the peers' watch runs and has not listed yet
  // A restarted peers' watch of the same Service: its unsynced snapshots are ignored, and the
  // last one's peers and readiness kept, until its first synced one (ReplacePeersWatch).
  bool keeping_ = false;
  std::vector<discovery::kubernetes::Endpoint>
      last_synced_;  // a restart's kept peers (ReplacePeersWatch)
  // This Pod's zone from before a restart of the same node's discovery, until it reads it again.
  std::string carried_zone_;
};

}  // namespace podnet::app
