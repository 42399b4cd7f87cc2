#include "exporter/app/kubernetes_watches.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <cstdlib>
#include <utility>
#include <vector>

#include "exporter/discovery/kubernetes/api_config.h"
#include "exporter/discovery/kubernetes/endpoint_peer.h"
#include "exporter/probes/dns/resolv_conf.h"
#include "exporter/runtime/loop_role.h"
#include "exporter/topology/sample.h"

namespace podnet::app {
namespace k8s = discovery::kubernetes;
namespace {

// The peers' watch peers.kubernetes asks for.
k8s::DiscoveryOptions PeersWatchOptions(const config::Config& c) {
  k8s::DiscoveryOptions o;
  o.namespace_name = c.kubernetes->namespace_name;
  o.service = c.kubernetes->service;
  o.node = c.self.node;
  o.want_zone = c.self.zone.empty();
  return o;
}

// DNS discovery, when peers.kubernetes.discovery is dns or auto: the name, resolv.conf's first
// nameserver (the file probes.dns reads, /etc/resolv.conf without it; the libc default
// 127.0.0.1 when it lists none).
k8s::DnsDiscoveryOptions PeersDnsOptions(const config::Config& c) {
  const config::KubernetesPeers& k = *c.kubernetes;
  k8s::DnsDiscoveryOptions o;
  o.name = k.DnsName();
  auto conf = probes::dns::LoadResolvConf(c.dns ? c.dns->resolv_conf : "/etc/resolv.conf",
                                          config::kinds::dns::Libc::kGlibc, {});
  if (!conf.nameservers.empty()) {
    o.nameserver = conf.nameservers.front().address;
    o.nameserver_port = conf.nameservers.front().port;
  } else {
    o.nameserver = boost::asio::ip::make_address("127.0.0.1");
  }
  o.port = k.port;
  o.refresh = std::chrono::duration_cast<std::chrono::milliseconds>(k.dns_refresh);
  o.namespace_name = k.namespace_name;
  o.service = k.service;
  o.node = c.self.node;
  o.want_zone = c.self.zone.empty();
  return o;
}

bool SameDns(const std::optional<k8s::DnsDiscoveryOptions>& a,
             const std::optional<k8s::DnsDiscoveryOptions>& b) {
  if (!a || !b) return !a && !b;
  return a->name == b->name && a->nameserver == b->nameserver &&
         a->nameserver_port == b->nameserver_port && a->port == b->port && a->refresh == b->refresh;
}

// The cluster DNS watch, when probes.dns.cluster_dns asks for it.
std::optional<k8s::DiscoveryOptions> DnsWatchOptions(const config::Config& c) {
  if (!c.dns || !c.dns->cluster_dns) return std::nullopt;
  k8s::DiscoveryOptions o;
  o.namespace_name = c.dns->cluster_dns->namespace_name;
  o.service = c.dns->cluster_dns->service;
  o.resource = "dns_endpointslices";
  o.count_candidates = false;
  return o;
}

// Whether a watch started with `a` asks what one with `b` would (peers_per_zone, ports and
// max_servers are the probe loop's to apply).
bool SameWatch(const k8s::DiscoveryOptions& a, const k8s::DiscoveryOptions& b) {
  return a.namespace_name == b.namespace_name && a.service == b.service && a.node == b.node &&
         a.want_zone == b.want_zone;
}

}  // namespace

KubernetesWatches::KubernetesWatches(boost::asio::io_context& io,
                                     std::optional<std::string> kubeconfig,
                                     std::string service_account_dir,
                                     prometheus::Registry& registry, ProbeLoop& probe,
                                     std::function<void()> on_sync_change)
    : io_(io),
      kubeconfig_(std::move(kubeconfig)),
      service_account_dir_(std::move(service_account_dir)),
      registry_(registry),
      probe_(probe),
      on_sync_change_(std::move(on_sync_change)),
      auto_tick_(io) {}

KubernetesWatches::~KubernetesWatches() = default;

bool KubernetesWatches::Configure(const config::Config& c, std::string* error) {
  PODNET_DCHECK_NOT_LOOP(kResponder);
  if (!c.kubernetes) {
    Off();
    return true;
  }
  using Discovery = config::KubernetesPeers::Discovery;
  const config::KubernetesPeers& k = *c.kubernetes;
  auto peers = PeersWatchOptions(c);
  k8s::DnsDiscoveryOptions dns_side = PeersDnsOptions(c);
  std::optional<k8s::DnsDiscoveryOptions> peers_dns;
  if (k.discovery == Discovery::kDns) peers_dns = dns_side;
  auto dns = DnsWatchOptions(c);
  const bool want_auto = k.discovery == Discovery::kAuto;
  const auto dns_from = static_cast<std::size_t>(k.auto_dns_from);
  // An `auto` discovery whose settings stay keeps running on the source it chose.
  bool peers_same =
      peers_ && SameWatch(peers_options_, peers) &&
      (want_auto ? auto_ && SameDns(auto_->dns, dns_side) && auto_->dns_from == dns_from
                 : !auto_ && SameDns(peers_dns_, peers_dns));
  bool dns_same = dns ? dns_ && SameWatch(dns_options_, *dns) : !dns_;
  // Credentials first, for each watch that changes: when they cannot be read, the reload fails
  // like a bad file does and the running watches (and their peers) are kept.
  std::unique_ptr<k8s::ApiClient> dns_client, peers_client;
  if (dns && !dns_same && !(dns_client = MakeApiClient(error))) return false;
  if (!peers_same && !(peers_client = MakeApiClient(error))) return false;
  if (!metrics_) metrics_ = std::make_unique<k8s::DiscoveryMetrics>(registry_);
  if (!dns_same) ReplaceDnsWatch(dns, std::move(dns_client));
  if (!peers_same && want_auto) {
    // The DNS records first: one question tells a small cluster's Pod to take the watch.
    auto_.emplace();
    auto_->dns = dns_side;
    auto_->dns_from = dns_from;
    auto_->since = std::chrono::steady_clock::now();
    ReplacePeersWatch(peers, dns_side, std::move(peers_client));
    ArmAutoTick();
  } else if (!peers_same) {
    auto_.reset();
    ReplacePeersWatch(peers, peers_dns, std::move(peers_client));
  }
  return ConfigureServiceInfo(c, error);
}

k8s::PeerSource KubernetesWatches::RunningSource() const {
  return peers_dns_ ? k8s::PeerSource::kDns : k8s::PeerSource::kWatch;
}

void KubernetesWatches::ArmAutoTick() {
  auto_tick_.expires_after(kAutoTick);
  auto_tick_.async_wait([this, generation = auto_generation_](boost::system::error_code ec) {
    if (ec || generation != auto_generation_ || !auto_ || !peers_) return;
    AutoTick();
  });
}

void KubernetesWatches::AutoTick() {
  const auto running = RunningSource();
  const auto waited = std::chrono::steady_clock::now() - auto_->since;
  if ((!peers_->synced() || keeping_) && waited >= k8s::kAutoFirstAnswerDeadline &&
      !auto_->switching) {
    // The source taken (or the first one) has not synced: back to the other one, which the
    // kept peers came from (or, first, the watch). Two that never sync alternate once a tick.
    const auto to =
        running == k8s::PeerSource::kDns ? k8s::PeerSource::kWatch : k8s::PeerSource::kDns;
    const std::string& last = peers_->last_error();
    const auto generation = auto_generation_;
    SwitchAuto(to, "the " + std::string(k8s::PeerSourceName(running)) + " has not synced in " +
                       std::to_string(k8s::kAutoFirstAnswerDeadline.count()) + " s" +
                       (last.empty() ? "" : " (" + last + ")"));
    if (generation == auto_generation_) ArmAutoTick();  // the switch failed: tried again
    return;
  }
  // A switch the dwell held back, or one a failed switch left to do: judged again here, as the
  // discovery publishes only when its Pods change.
  if (peers_->synced() && !keeping_) JudgeAuto(peers_->snapshot());
  ArmAutoTick();
}

void KubernetesWatches::JudgeAuto(const k8s::Snapshot& snap) {
  if (!auto_ || !snap.synced || auto_->switching) return;
  const auto running = RunningSource();
  const std::size_t pods = snap.endpoints.size();
  const auto want = k8s::AutoPeerSource(auto_->decided, pods, auto_->dns_from);
  const auto now = std::chrono::steady_clock::now();
  const std::string why = std::to_string(pods) + " ready probe Pods (DNS records from " +
                          std::to_string(auto_->dns_from) + ")";
  if (want == running) {
    if (!auto_->decided) {
      auto_->decided = running;
      auto_->since = now;
      spdlog::info("kubernetes discovery: auto keeps the {}: {}", k8s::PeerSourceName(running),
                   why);
    }
    return;
  }
  // Back to the watch at once (the records say too few, or may be cut); to the records only
  // after the dwell, longer each time they were left within one (auto_source.h).
  if (want == k8s::PeerSource::kDns && auto_->decided && now - auto_->since < auto_->dns_dwell) {
    return;
  }
  // Not from inside the discovery's callback: SwitchAuto destroys it.
  auto_->switching = true;
  boost::asio::post(io_, [this, generation = auto_generation_, want, why] {
    if (generation == auto_generation_) SwitchAuto(want, why);
  });
}

void KubernetesWatches::SwitchAuto(k8s::PeerSource to, const std::string& why) {
  if (!auto_ || !peers_) return;
  std::string error;
  auto client = MakeApiClient(&error);
  if (!client) {  // tried again at the next tick
    auto_->switching = false;
    spdlog::warn("kubernetes discovery: auto stays on the {} ({}): {}",
                 k8s::PeerSourceName(RunningSource()), why, error);
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (peers_dns_ && auto_->decided == k8s::PeerSource::kDns) {
    // Leaving records taken within one dwell: they disagree with the watch (a wrong name, a
    // DNS that cannot list them); the next try waits twice as long (at most a day).
    auto_->dns_dwell = now - auto_->since < k8s::kAutoDwell
                           ? std::min<std::chrono::steady_clock::duration>(auto_->dns_dwell * 2,
                                                                           k8s::kAutoMaxDwell)
                           : std::chrono::steady_clock::duration(k8s::kAutoDwell);
  }
  auto_->decided = to;
  auto_->since = now;
  auto_->switching = false;
  ReplacePeersWatch(peers_options_,
                    to == k8s::PeerSource::kDns ? std::optional(auto_->dns) : std::nullopt,
                    std::move(client));
  ArmAutoTick();
  spdlog::info("kubernetes discovery: auto takes the {}: {}", k8s::PeerSourceName(to), why);
}

void KubernetesWatches::Off() {
  service_info_.reset();  // before the metrics it counts its errors in
  auto_.reset();
  auto_tick_.cancel();
  ++auto_generation_;
  StopDnsWatch();
  if (peers_) {
    spdlog::info("kubernetes discovery: off");
    peers_->Stop();
    peers_.reset();
    unsynced_ = false;
    peers_synced_ = false;
    keeping_ = false;
    last_synced_.clear();
    carried_zone_.clear();
    on_sync_change_();
    probe_.DiscoveryOff();
  }
  peers_dns_.reset();
  dns_metrics_.reset();
  metrics_.reset();
}

void KubernetesWatches::ReplaceDnsWatch(const std::optional<k8s::DiscoveryOptions>& options,
                                        std::unique_ptr<k8s::ApiClient> client) {
  StopDnsWatch();
  if (!options) return;
  dns_options_ = *options;
  // Posted to the probe loop like the peers' snapshots; Stop() ends its calls first, so a
  // replaced watch never posts after its successor.
  dns_ = std::make_unique<k8s::KubernetesDiscovery>(
      io_, std::move(client), *options, *metrics_,
      [this](const k8s::Snapshot& snap) { probe_.DnsEndpoints(snap.endpoints); });
  dns_->Start();
}

void KubernetesWatches::OnPeersSnapshot(const k8s::Snapshot& snap) {
  if (keeping_ && !snap.synced) return;  // the last source's peers until this one has synced
  keeping_ = false;
  unsynced_ = !snap.synced;
  on_sync_change_();
  // The duty is drawn over the synced Pods: a Pod on duty polls as soon as its watch has them,
  // not one interval later.
  if (snap.synced && !peers_synced_ && service_info_) service_info_->PollNow();
  peers_synced_ = snap.synced;
  if (snap.self_zone.empty() && !carried_zone_.empty()) {
    k8s::Snapshot with_zone = snap;
    with_zone.self_zone = carried_zone_;
    probe_.Discovered(std::move(with_zone));
  } else {
    probe_.Discovered(snap);
  }
  JudgeAuto(snap);
}

void KubernetesWatches::ReplacePeersWatch(const k8s::DiscoveryOptions& options,
                                          const std::optional<k8s::DnsDiscoveryOptions>& dns,
                                          std::unique_ptr<k8s::ApiClient> client) {
  // Only now, with credentials in hand, the running watch goes: a reload whose credentials
  // fail keeps it (and its peers) running. When the new one reads the same Service (another
  // mode, watch <-> dns, or another option), the old one's peers and readiness stay until the
  // new one has synced: the same Pods, and every exporter reloads one ConfigMap at once, so
  // dropping them would stop all probing and make every Pod unready together (and, in DNS
  // mode, take them all out of the very records it reads).
  // A restart during a restart keeps what the first one kept.
  bool keep = peers_ && (peers_->synced() || keeping_) &&
              peers_options_.namespace_name == options.namespace_name &&
              peers_options_.service == options.service;
  // This Pod's zone, read from its Node, is carried over while the new discovery has not read
  // it again (its API server may be out of reach): the same node, the same zone.
  std::string zone = keep && peers_options_.node == options.node ? self_zone() : "";
  // The peers a new DNS discovery starts from: read once here, from the last discovery that
  // had synced (a restart during a restart keeps the first one's).
  if (!keep) {
    last_synced_.clear();
  } else if (peers_->synced()) {
    last_synced_ = peers_->snapshot().endpoints;
  }
  if (peers_) {
    peers_->Stop();
    peers_.reset();
    if (!keep) probe_.DiscoveryRestarted();  // a new Service: start clean
  }
  // The candidates gauge says what is probed: the kept count until the new discovery has
  // synced and sets its own (a stopped watch set it to 0).
  ++auto_generation_;  // a switch posted for the discovery replaced here does nothing
  metrics_->SetSource(k8s::PeerSourceName(dns ? k8s::PeerSource::kDns : k8s::PeerSource::kWatch));
  if (keep) metrics_->candidates().Set(static_cast<double>(last_synced_.size()));
  carried_zone_ = zone;
  peers_options_ = options;
  peers_dns_ = dns;
  keeping_ = keep;
  // Stop() ends the calls, so a stopped watch never posts after the snapshot that replaced it.
  auto on_change = [this](const k8s::Snapshot& snap) { OnPeersSnapshot(snap); };
  if (dns) {
    if (!dns_metrics_) dns_metrics_ = std::make_unique<k8s::DnsDiscoveryMetrics>(registry_);
    // Kept peers seed the new DNS discovery: an NXDOMAIN or empty first answer (every Pod out
    // of the records for a moment) keeps them for the grace, as the last discovery would have.
    peers_ = std::make_unique<k8s::DnsDiscovery>(io_, std::move(client), *dns, *metrics_,
                                                 *dns_metrics_, on_change, last_synced_);
  } else {
    dns_metrics_.reset();
    peers_ = std::make_unique<k8s::KubernetesDiscovery>(io_, std::move(client), options, *metrics_,
                                                        on_change);
  }
  if (keep) {
    spdlog::info(
        "kubernetes discovery: restarted for service {}/{}; its peers are kept until "
        "it has synced",
        options.namespace_name, options.service);
  }
  unsynced_ = !keep;
  peers_synced_ = false;  // the new watch's first synced snapshot polls the Services
  on_sync_change_();
  peers_->Start();
}

void KubernetesWatches::StopDnsWatch() {
  if (!dns_) return;
  spdlog::info("kubernetes discovery: DNS servers of service {}/{} off",
               dns_options_.namespace_name, dns_options_.service);
  dns_->Stop();
  dns_.reset();
  probe_.DnsEndpoints({});
}

bool KubernetesWatches::ConfigureServiceInfo(const config::Config& c, std::string* error) {
  PODNET_DCHECK_NOT_LOOP(kResponder);
  service_info_self_ = c.self;
  std::vector<k8s::ServiceRef> refs;
  if (c.kubernetes && c.service) {
    for (const auto& t : c.service->targets) {
      if (!t.kubernetes_name.empty()) {
        refs.push_back({t.name, t.kubernetes_namespace, t.kubernetes_name});
      }
    }
  }
  if (service_info_ && service_info_->refs() == refs) return true;
  if (refs.empty()) {
    service_info_.reset();
    return true;
  }
  auto client = MakeApiClient(error);
  if (!client) return false;
  service_info_.reset();  // removes the family before the new poller registers it
  service_info_ = std::make_unique<k8s::ServiceInfoPoller>(
      io_, std::move(client), std::move(refs), kServiceInfoInterval, registry_, *metrics_,
      [this] { return ServiceInfoDuty(); });
  service_info_->Start();
  return true;
}

bool KubernetesWatches::ServiceInfoDuty() const {
  if (!peers_ || !peers_->synced()) return false;
  topology::Self self = service_info_self_;
  if (self.zone.empty()) self.zone = self_zone();
  const k8s::Snapshot& snap = peers_->snapshot();
  // Only the Pods' names and zones count here: the ports are not read.
  std::vector<topology::Peer> pods = k8s::ProbePeersOf(self, snap.endpoints, 0, 0);
  return topology::InZoneSample(
      "service info", topology::PeriodNumber(std::chrono::system_clock::now(), kServiceInfoPeriod),
      self, pods, kServiceInfoPodsPerZone, snap.service_uid);
}

std::unique_ptr<k8s::ApiClient> KubernetesWatches::MakeApiClient(std::string* error) {
  // --kubeconfig, else $KUBECONFIG (its first file), else the Pod's service account.
  std::optional<k8s::ApiConfig> api;
  std::string kubeconfig = kubeconfig_.value_or("");
  if (kubeconfig.empty()) {
    if (const char* env = std::getenv("KUBECONFIG")) kubeconfig = env;
    kubeconfig = kubeconfig.substr(0, kubeconfig.find(':'));
  }
  if (!kubeconfig.empty()) {
    api = k8s::LoadKubeconfig(kubeconfig, "", error);
  } else {
    api = k8s::InClusterConfig(service_account_dir_, config::ProcessEnv(), error);
  }
  if (!api) return nullptr;
  return k8s::ApiClient::Create(io_, std::move(*api), {}, error);
}

void KubernetesWatches::Stop() {
  ++auto_generation_;
  auto_tick_.cancel();
  if (peers_) peers_->Stop();
  if (dns_) dns_->Stop();
  if (service_info_) service_info_->Stop();
}

void KubernetesWatches::Release() {
  service_info_.reset();
  peers_.reset();
  dns_.reset();
}

std::string KubernetesWatches::NotSyncedReason() const {
  // With Kubernetes discovery, ready once the first list succeeded: before it this Pod would
  // probe no one (or only its static peers) and a rollout should wait.
  if (!peers_ || !unsynced_) return "";  // synced, or kept from before a restart
  std::string why = peers_dns_
                        ? "Kubernetes discovery has not had the DNS records of " +
                              peers_dns_->name + " and asked each address who it is yet"
                        : "Kubernetes discovery has not listed the EndpointSlices of service " +
                              peers_options_.namespace_name + "/" + peers_options_.service + " yet";
  const std::string& last = peers_->last_error();
  if (last.empty()) return why + (peers_dns_ ? " (in flight)" : " (the first list is in flight)");
  return why + "; last error: " + last;
}

std::chrono::milliseconds KubernetesWatches::PeersStaleness() const {
  if (!peers_) return std::chrono::milliseconds(0);
  const k8s::DnsDiscoveryOptions* dns = peers_dns_ ? &*peers_dns_ : nullptr;
  // With `auto`, the peers may read the records where this Pod does not (a dwell, its own
  // node's DNS): the records' staleness from 3/4 of the threshold on.
  if (!dns && auto_ && peers_->snapshot().endpoints.size() * 4 >= auto_->dns_from * 3) {
    dns = &auto_->dns;
  }
  if (!dns) return std::chrono::milliseconds(0);
  return dns->refresh * 11 / 10 + kDnsRecordTtl + std::chrono::seconds(2);
}

std::string KubernetesWatches::self_zone() const {
  if (!peers_) return "";
  const std::string& zone = peers_->snapshot().self_zone;
  return zone.empty() ? carried_zone_ : zone;
}

}  // namespace podnet::app
