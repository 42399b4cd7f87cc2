#include "exporter/app/app.h"

#include <prometheus/counter.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "exporter/app/early_signals.h"
#include "exporter/app/info.h"
#include "exporter/discovery/kubernetes/api_config.h"
#include "exporter/discovery/kubernetes/endpoint_peer.h"
#include "exporter/discovery/static_peers.h"
#include "exporter/log/last_chance.h"
#include "exporter/probes/registry.h"
#include "exporter/proto/echo.h"
#include "exporter/runtime/loop_role.h"
#include "exporter/topology/compose.h"
#include "exporter/topology/selection.h"
#include "podnet/version.h"

namespace podnet::app {
namespace {

// nice(2) of the control loop's thread, against 0 for the responder and probe loops.
constexpr int kControlNice = 10;
// nice(2) of the thread that runs bcrypt checks where SCHED_IDLE cannot be had: the lowest, so
// that a flood's checks (at most 2 a second) take CPU from no loop, not even a scrape's.
constexpr int kAuthWorkerNice = 19;

// /-/reload: at most one reload per interval; at most this many requests wait for the next.
constexpr auto kReloadInterval = std::chrono::seconds(1);
constexpr std::size_t kMaxReloadWaiting = 16;

// How often the TLS certificate files are looked at for changes.
constexpr auto kTlsRefreshInterval = std::chrono::seconds(2);

// What stays plain HTTP and open with a web configuration: the peers' latency target (its RTT
// must not include a TLS handshake or a bcrypt check) and the kubelet's probes.
bool OpenPath(const std::string& path) {
  return path == "/echo" || path == "/-/healthy" || path == "/-/ready";
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// 75 bytes, like the reference run's echo server: small enough that a request's latency is the
// network's and the server's, not the transfer's.
constexpr char kEchoBody[] =
    "podnet-exporter echo: this body is a fixed 75 bytes for the latency probes\n";
static_assert(sizeof kEchoBody - 1 == 75);

std::string LandingPage() {
  return std::string(R"(<!doctype html>
<html><head><title>podnet-exporter</title></head>
<body>
<h1>podnet-exporter</h1>
<p>Pod-to-Pod network latency by path class, version )") +
         kVersion + R"(.</p>
<ul>
<li><a href="/metrics">/metrics</a></li>
<li><a href="/podnet/info">/podnet/info</a></li>
<li><a href="/-/healthy">/-/healthy</a> and <a href="/-/ready">/-/ready</a></li>
<li>/-/reload (POST) reloads the configuration</li>
<li><a href="/echo">/echo</a> is the peers' latency target</li>
</ul>
</body></html>
)";
}

}  // namespace

App::App(Options options, std::shared_ptr<const config::Config> config,
         std::shared_ptr<const web::WebConfig> web)
    : options_(std::move(options)), web_(std::move(web)), config_(std::move(config)) {
  if (web_ && !web_->users.empty()) {
    web::AuthLimits limits;
    auth_ = std::make_unique<web::AuthGate>(web::BasicAuth(web_->users), limits,
                                            std::chrono::steady_clock::now());
    auth_worker_ = std::make_unique<runtime::BoundedWorker>(limits.max_pending, [] {
      // bcrypt is slow on purpose: it runs only when no loop wants the CPU (SCHED_IDLE, for
      // this thread alone; no privilege needed to lower it), else at the lowest nice.
      sched_param none{};
      if (sched_setscheduler(0, SCHED_IDLE, &none) != 0 &&
          setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kAuthWorkerNice) != 0) {
        spdlog::debug("auth worker: no lower priority: {}", std::strerror(errno));
      }
    });
    auto& family = prometheus::BuildCounter()
                       .Name("podnet_web_auth_failures_total")
                       .Help("Requests refused by basic auth (--web.config.file), by reason")
                       .Register(metrics_.registry());
    using V = web::AuthGate::Verdict;
    auth_failures_.assign(static_cast<std::size_t>(V::kCheck) + 1, nullptr);
    const std::pair<V, const char*> kReasons[] = {
        {V::kMissing, "missing"},          {V::kMalformed, "malformed"},
        {V::kKnownWrong, "known_wrong"},   {V::kSourceLimited, "source_limited"},
        {V::kRateLimited, "rate_limited"}, {V::kCheck, "wrong_credentials"}};
    for (auto [verdict, reason] : kReasons) {
      auth_failures_[static_cast<std::size_t>(verdict)] = &family.Add({{"reason", reason}});
    }
  }
  metrics_.SetReloadOutcome(true, UnixNow());
  // The HTTP server's own reasons are in the same family (responders/http_server.h).
  reload_refused_ = &responders::ResponderDropped(metrics_.registry())
                         .Add({{"responder", "http"}, {"reason", "reload_queue_full"}});
  reload_pacer_ = std::make_unique<ReloadPacer>(
      respond_io_, kReloadInterval, kMaxReloadWaiting, [this](ReloadPacer::Batch batch) {
        boost::asio::post(control_io_, [this, batch = std::move(batch)]() mutable {
          RunReload(std::move(batch));
        });
      });
}

App::~App() = default;

void App::Stop() {
  control_io_.stop();
  respond_io_.stop();
  probe_io_.stop();
}

int App::Run() {
  std::shared_ptr<const config::Config> config;
  {
    std::lock_guard lock(config_mu_);
    config = config_;
  }
  if (web_ && web_->tls) {
    try {
      tls_ = std::make_shared<web::TlsContextSource>(web_->tls);
    } catch (const std::exception& e) {
      spdlog::error("{}: tls_server_config: {}", web_->file, e.what());
      return 2;
    }
  }
  net::HostPort listen = config->listen_address;
  if (options_.listen_address) {
    std::string err;
    auto hp = net::ParseHostPort(*options_.listen_address, &err);
    if (!hp) {
      spdlog::error("--web.listen-address: {}", err);
      return 2;
    }
    listen = *hp;
  }
  if (!bounded_.wrap && !BindListeners(*config, listen)) return 1;

  probe_env_ = std::make_unique<probes::ProbeEnv>(probes::ProbeEnv{probe_io_, metrics_, {}});
  scheduler_ = std::make_unique<scheduler::Scheduler>(probe_io_, &scheduler_metrics_);
  boost::asio::post(probe_io_, [this, config] { Reconcile(config); });
  if (bounded_.start) boost::asio::post(probe_io_, [this] { bounded_.start(probe_io_); });
  if (std::string err; !ConfigureDiscovery(*config, &err)) {
    spdlog::error("peers.kubernetes: {}", err);
    return 2;
  }

  boost::asio::signal_set signals(control_io_, SIGHUP, SIGINT, SIGTERM);
  std::function<void(boost::system::error_code, int)> on_signal = [&](boost::system::error_code ec,
                                                                      int sig) {
    if (ec) return;
    if (sig == SIGHUP) {
      std::string err;
      Reload(&err);
      signals.async_wait(on_signal);
      return;
    }
    spdlog::info("received signal {}, stopping", sig);
    Stop();
  };
  signals.async_wait(on_signal);
  // Certificates re-read when their files change (cert-manager renewals, Secret updates).
  boost::asio::steady_timer tls_refresh(control_io_);
  std::function<void()> refresh_tls = [&] {
    tls_refresh.expires_after(kTlsRefreshInterval);
    tls_refresh.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      std::string err;
      if (tls_->Refresh(&err)) {
        spdlog::info("TLS: certificate files changed; new connections use them");
      } else if (!err.empty()) {
        spdlog::error(
            "TLS: certificate files changed but cannot be used, keeping the previous "
            "ones: {}",
            err);
      }
      refresh_tls();
    });
  };
  if (tls_) refresh_tls();
  // A SIGHUP that came while we were starting (main() made it harmless) may mean the file
  // changed after we read it: reload once, now that the loop's handler is in place.
  if (TakeEarlyReload()) {
    boost::asio::post(control_io_, [this] {
      std::string err;
      Reload(&err);
    });
  }

  auto probe_work = boost::asio::make_work_guard(probe_io_);
  auto respond_work = boost::asio::make_work_guard(respond_io_);
  // The responder and probe loops time things: each asks for a short slice, so that it
  // preempts the control loop's long runs when it wakes (runtime::RequestShortSlice).
  std::thread probe_thread([this] {
    runtime::BindLoop bind(runtime::Loop::kProbe);
    if (int err = runtime::RequestShortSlice()) {
      spdlog::debug("probe loop: no short time slice: {}", std::strerror(err));
    }
    log::RunOrExit("probe", [this] { probe_io_.run(); });
  });
  std::thread respond_thread([this] {
    runtime::BindLoop bind(runtime::Loop::kResponder);
    if (int err = runtime::RequestShortSlice()) {
      spdlog::debug("responder loop: no short time slice: {}", std::strerror(err));
    }
    log::RunOrExit("responder", [this] { respond_io_.run(); });
  });
  ready_ = true;
  {
    runtime::BindLoop bind(runtime::Loop::kControl);
    // The control loop's work (a scrape's collection and text, a reload, a relist's JSON) can
    // take a core for tens of milliseconds. At a lower priority than the responder and probe
    // threads (nice is per thread on Linux, sched(7); raising it needs no privilege), the kernel
    // runs those first when they wake, so a peer's echo does not queue behind a scrape for CPU
    // either. Threads this thread starts from now on inherit it.
    if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kControlNice) != 0) {
      spdlog::debug("control loop: setpriority: {}", std::strerror(errno));
    }
    log::RunOrExit("control", [this] { control_io_.run(); });
  }

  ready_ = false;
  if (discovery_) discovery_->Stop();
  if (dns_discovery_) dns_discovery_->Stop();
  if (service_info_) service_info_->Stop();
  // The responders go with their loop: stopped first, then destroyed after their thread ended
  // (nothing of theirs runs any more), so no peer is answered by a half-torn-down server.
  respond_io_.stop();
  respond_thread.join();
  auth_worker_.reset();  // a check still running posts to a loop that no longer runs
  http_.reset();
  udp_echo_.reset();
  probe_io_.stop();
  probe_thread.join();
  service_info_.reset();
  discovery_.reset();
  dns_discovery_.reset();
  return 0;
}

bool App::BindListeners(const config::Config& config, const net::HostPort& listen) {
  // Each listener binds on its own, and a failure names that listener's key and address: a
  // taken port must point at the setting to change, not at a neighbour.
  bool bound =
      Listen("HTTP", options_.listen_address ? "--web.listen-address" : "listen_address", listen,
             [&] {
               http_ = std::make_unique<responders::HttpServer>(
                   respond_io_, listen,
                   responders::AsyncHttpHandler(
                       [this](responders::HttpRequest r, responders::HttpRespond respond) {
                         Route(std::move(r), std::move(respond));
                       }),
                   responders::HttpLimits{}, &metrics_.registry());
               if (tls_) http_->EnableTls([tls = tls_] { return tls->Current(); });
               if (web_) http_->SetResponseHeaders(web_->headers);
               return http_->port();
             }) &&
      Listen("UDP echo", "responders.udp_echo.listen_address", config.udp_echo_listen_address,
             [&] {
               udp_echo_ = std::make_unique<responders::UdpEchoResponder>(
                   respond_io_, config.udp_echo_listen_address, metrics_.registry());
               return udp_echo_->port();
             }) &&
      (!config.burst_responder ||
       Listen("bursts (iperf3-compatible)", "responders.burst.listen_address",
              config.burst_responder->listen_address, [&] {
                burst_ = std::make_unique<responders::BurstResponder>(*config.burst_responder,
                                                                      metrics_.registry());
                return burst_->port();
              }));
#ifdef PODNET_WITH_GRPC
  bound = bound && (!config.grpc_listen_address ||
                    Listen("gRPC health", "responders.grpc.listen_address",
                           *config.grpc_listen_address, [&] {
                             grpc_health_ = std::make_unique<responders::GrpcHealthServer>(
                                 *config.grpc_listen_address, metrics_.registry());
                             return grpc_health_->port();
                           }));
#endif
  return bound;
}

bool App::Listen(std::string_view what, std::string_view key, const net::HostPort& at,
                 const std::function<std::uint16_t()>& bind) {
  std::string where = net::FormatHostPort(at.address, at.port);
  try {
    std::uint16_t port = bind();
    spdlog::info("listening on {} ({})", net::FormatHostPort(at.address, port), what);
    return true;
  } catch (const boost::system::system_error& e) {
    spdlog::error("cannot listen for {} on {} ({}): {}", what, where, key, e.code().message());
  } catch (const std::exception& e) {
    spdlog::error("cannot listen for {} on {} ({}): {}", what, where, key, e.what());
  }
  return false;
}

bool App::Reload(std::string* error) {
  PODNET_DCHECK_NOT_LOOP(kResponder);
  auto result = config::LoadFile(options_.config_file, config::ProcessEnv());
  for (const auto& w : result.warnings) spdlog::warn("reload: {}", w.ToString());
  if (!result.ok()) {
    std::string all;
    for (const auto& e : result.errors) {
      spdlog::error("reload failed, keeping the running configuration: {}", e.ToString());
      all += e.ToString() + "\n";
    }
    metrics_.SetReloadOutcome(false, UnixNow());
    *error = all;
    return false;
  }
  // Discovery first: credentials that cannot be read fail the reload like a bad file does,
  // and keep the running configuration (and discovery) — otherwise a reload reported as
  // successful would leave the Pod without its Kubernetes peers.
  if (std::string err; !ConfigureDiscovery(*result.config, &err)) {
    spdlog::error("reload failed, keeping the running configuration: peers.kubernetes: {}", err);
    metrics_.SetReloadOutcome(false, UnixNow());
    *error = "peers.kubernetes: " + err + "\n";
    return false;
  }
  std::shared_ptr<const config::Config> previous;
  {
    std::lock_guard lock(config_mu_);
    previous = config_;
    config_ = result.config;
  }
  if (previous->listen_address.address != result.config->listen_address.address ||
      previous->listen_address.port != result.config->listen_address.port ||
      previous->udp_echo_listen_address.port != result.config->udp_echo_listen_address.port ||
      previous->udp_echo_listen_address.address != result.config->udp_echo_listen_address.address) {
    spdlog::warn("reload: listen addresses are kept until a restart");
  }
  boost::asio::post(probe_io_, [this, next = result.config] { Reconcile(next); });
  metrics_.SetReloadOutcome(true, UnixNow());
  spdlog::info("configuration reloaded from {}", options_.config_file);
  return true;
}

bool App::ConfigureDiscovery(const config::Config& c, std::string* error) {
  PODNET_DCHECK_NOT_LOOP(kResponder);
  namespace k8s = discovery::kubernetes;
  if (!c.kubernetes) {
    service_info_.reset();  // before the metrics it counts its errors in
    StopDnsDiscovery();
    if (discovery_) {
      spdlog::info("kubernetes discovery: off");
      discovery_->Stop();
      discovery_.reset();
      discovery_unsynced_ = false;
      boost::asio::post(probe_io_, [this] {
        discovered_ = {};
        Reconcile(applied_);
      });
    }
    discovery_metrics_.reset();
    return true;
  }
  k8s::DiscoveryOptions o;
  o.namespace_name = c.kubernetes->namespace_name;
  o.service = c.kubernetes->service;
  o.node = c.self.node;
  o.want_zone = c.self.zone.empty();
  bool same = discovery_ && discovery_options_.namespace_name == o.namespace_name &&
              discovery_options_.service == o.service && discovery_options_.node == o.node &&
              discovery_options_.want_zone == o.want_zone;
  // The cluster DNS watch, when probes.dns.cluster_dns asks for it.
  std::optional<k8s::DiscoveryOptions> dns;
  if (c.dns && c.dns->cluster_dns) {
    dns.emplace();
    dns->namespace_name = c.dns->cluster_dns->namespace_name;
    dns->service = c.dns->cluster_dns->service;
    dns->resource = "dns_endpointslices";
    dns->count_candidates = false;
  }
  bool dns_same = dns ? dns_discovery_ &&
                            dns_discovery_options_.namespace_name == dns->namespace_name &&
                            dns_discovery_options_.service == dns->service
                      : !dns_discovery_;
  // peers_per_zone, ports and max_servers apply in Reconcile.
  if (same && dns_same) return ConfigureServiceInfo(c, error);
  std::unique_ptr<k8s::ApiClient> dns_client;
  if (dns && !dns_same) {
    dns_client = MakeApiClient(error);
    if (!dns_client) return false;
  }
  std::unique_ptr<k8s::ApiClient> client;
  if (!same) {
    client = MakeApiClient(error);
    if (!client) return false;
  }
  if (!discovery_metrics_) {
    discovery_metrics_ = std::make_unique<k8s::DiscoveryMetrics>(metrics_.registry());
  }
  if (!dns_same) {
    StopDnsDiscovery();
    if (dns) {
      dns_discovery_options_ = *dns;
      // Posted to the probe loop like the peers' snapshots; Stop() ends its calls first, so a
      // replaced watch never posts after its successor.
      dns_discovery_ = std::make_unique<k8s::KubernetesDiscovery>(
          control_io_, std::move(dns_client), *dns, *discovery_metrics_,
          [this](const k8s::Snapshot& snap) {
            boost::asio::post(probe_io_, [this, endpoints = snap.endpoints] {
              dns_discovered_ = endpoints;
              UpdateDnsServers();
            });
          });
      dns_discovery_->Start();
    }
  }
  if (same) return ConfigureServiceInfo(c, error);
  // Only now, with credentials in hand, the running discovery goes: a reload whose credentials
  // fail keeps it (and its peers) running.
  if (discovery_) {
    discovery_->Stop();
    discovery_.reset();
    boost::asio::post(probe_io_, [this] { discovered_ = {}; });  // a new Service: start clean
  }
  discovery_options_ = o;
  // Called on the control loop; the probe loop owns what it feeds. Stop() ends the calls, so a
  // stopped discovery never posts after the snapshot that replaced it.
  discovery_ = std::make_unique<k8s::KubernetesDiscovery>(
      control_io_, std::move(client), o, *discovery_metrics_, [this](const k8s::Snapshot& snap) {
        discovery_unsynced_ = !snap.synced;
        boost::asio::post(probe_io_, [this, snap] {
          discovered_ = snap;
          Reconcile(applied_);
        });
      });
  discovery_unsynced_ = true;
  discovery_->Start();
  return ConfigureServiceInfo(c, error);
}

std::unique_ptr<discovery::kubernetes::ApiClient> App::MakeApiClient(std::string* error) {
  namespace k8s = discovery::kubernetes;
  // --kubeconfig, else $KUBECONFIG (its first file), else the Pod's service account.
  std::optional<k8s::ApiConfig> api;
  std::string kubeconfig = options_.kubeconfig.value_or("");
  if (kubeconfig.empty()) {
    if (const char* env = std::getenv("KUBECONFIG")) kubeconfig = env;
    kubeconfig = kubeconfig.substr(0, kubeconfig.find(':'));
  }
  if (!kubeconfig.empty()) {
    api = k8s::LoadKubeconfig(kubeconfig, "", error);
  } else {
    api = k8s::InClusterConfig(options_.service_account_dir, config::ProcessEnv(), error);
  }
  if (!api) return nullptr;
  return k8s::ApiClient::Create(control_io_, std::move(*api), {}, error);
}

bool App::ConfigureServiceInfo(const config::Config& c, std::string* error) {
  PODNET_DCHECK_NOT_LOOP(kResponder);
  namespace k8s = discovery::kubernetes;
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
      control_io_, std::move(client), std::move(refs), kServiceInfoInterval, metrics_.registry(),
      *discovery_metrics_);
  service_info_->Start();
  return true;
}

void App::StopDnsDiscovery() {
  if (!dns_discovery_) return;
  spdlog::info("kubernetes discovery: DNS servers of service {}/{} off",
               dns_discovery_options_.namespace_name, dns_discovery_options_.service);
  dns_discovery_->Stop();
  dns_discovery_.reset();
  boost::asio::post(probe_io_, [this] {
    dns_discovered_.clear();
    UpdateDnsServers();
  });
}

std::string App::NotReadyReason() const {
  PODNET_DCHECK_LOOP(kControl);
  if (!ready_) return "starting";
  // With Kubernetes discovery, ready once the first list succeeded: before it this Pod would
  // probe no one (or only its static peers) and a rollout should wait.
  if (!discovery_ || discovery_->synced()) return "";
  std::string why = "Kubernetes discovery has not listed the EndpointSlices of service " +
                    discovery_options_.namespace_name + "/" + discovery_options_.service + " yet";
  const std::string& last = discovery_->last_error();
  return why + (last.empty() ? " (the first list is in flight)" : "; last error: " + last);
}

void App::Reconcile(std::shared_ptr<const config::Config> next) {
  if (!next) return;
  // The effective self: the zone read from the Node fills an empty self.zone.
  topology::Self self = next->self;
  if (self.zone.empty() && next->kubernetes) self.zone = discovered_.self_zone;
  std::vector<topology::Peer> found;
  topology::SelectionOptions selection;
  if (next->kubernetes && discovered_.synced) {
    for (const auto& e : discovered_.endpoints) {
      found.push_back(discovery::kubernetes::PeerOf(self, e, next->kubernetes->port));
      found.back().burst_port = next->kubernetes->burst_port;
    }
    selection.peers_per_zone = next->kubernetes->peers_per_zone;
  }
  auto [peers, candidates, selected] = topology::ComposePeers(
      self, discovery::StaticPeers(self, next->static_peers), found, selection);
  const config::Config* prev = applied_.get();
  bool labels_changed =
      prev == nullptr || self_ != self || prev->aggregate_peers != next->aggregate_peers;
  if (labels_changed) {
    // Every series carries source labels (and the peer labels aggregate_peers picks): all
    // probes restart under the new identity and label set, removing their old series first.
    for (const auto& kind : probes::ProbeKinds()) scheduler_->SetKind(kind.name, nullptr, {});
    probe_env_->self = self;
    probe_env_->peer_labels = next->aggregate_peers ? metrics::PeerLabelSet::kAggregated
                                                    : metrics::PeerLabelSet::kPerPeer;
    for (const auto& kind : probes::ProbeKinds()) {
      scheduler_->SetKind(kind.name, MakeKind(kind, *next), peers);
    }
  } else {
    auto diff = topology::Diff(peers_, peers);
    scheduler_->UpdatePeers(diff);
    if (prev != next.get()) {
      for (const auto& kind : probes::ProbeKinds()) {
        if (kind.changed(*prev, *next)) {
          scheduler_->SetKind(kind.name, MakeKind(kind, *next), peers);
        }
      }
    }
    if (!diff.added.empty() || !diff.removed.empty()) {
      spdlog::info("peers: {} added, {} removed, {} kept", diff.added.size(), diff.removed.size(),
                   diff.kept.size());
    }
  }
  if (prev == nullptr || self_ != self) {
    // The responders answer with the effective identity: a zone read from the Node later (or
    // a reload that changes self) reaches them here, one post to their loop, before any probe
    // of this Reconcile runs a round.
    boost::asio::post(respond_io_, [this, node = self.node, zone = self.zone] {
      echo_identity_headers_ = {{std::string(proto::echo::kNodeHeader), node},
                                {std::string(proto::echo::kZoneHeader), zone}};
      if (udp_echo_) udp_echo_->SetIdentity(node, zone);
    });
  }
  metrics_.SetPeers(peers);
  bool log = prev != next.get() || peers != peers_ || labels_changed;
  peers_ = std::move(peers);
  self_ = self;
  applied_ = std::move(next);
  UpdateDnsServers();  // max_servers, port or this Pod's zone may have changed
  if (log) {
    std::string probes;
    for (const auto& kind : config::EnabledProbes(*applied_)) {
      probes += (probes.empty() ? "" : ", ") + kind;
    }
    std::string what = peers_.size() == 1 ? "1 peer" : std::to_string(peers_.size()) + " peers";
    if (applied_->kubernetes) {
      what += " (" + std::to_string(selected) + " selected of " + std::to_string(candidates) +
              " Kubernetes candidate" + (candidates == 1 ? "" : "s") + ")";
    }
    spdlog::info("probing {} with {}", what, probes.empty() ? "no probes" : probes);
  }
}

void App::UpdateDnsServers() {
  std::vector<topology::Peer> servers;
  std::size_t found = 0;
  if (applied_ && applied_->kubernetes && applied_->dns && applied_->dns->cluster_dns) {
    const auto& cd = *applied_->dns->cluster_dns;
    for (const auto& e : dns_discovered_) {
      servers.push_back(discovery::kubernetes::PeerOf(self_, e, cd.port));
    }
    found = servers.size();
    servers =
        topology::SpreadOverZones(std::move(servers), static_cast<std::size_t>(cd.max_servers));
  }
  std::size_t over = found - servers.size();
  if (over > 0 && probe_env_->dns_servers_over_cap == 0) {
    spdlog::warn(
        "dns: {} cluster DNS endpoints, asking {} (probes.dns.cluster_dns.max_servers); the "
        "others are counted as servers_over_cap",
        found, servers.size());
  }
  if (servers != probe_env_->dns_servers) {
    spdlog::info("dns: asking {} cluster DNS endpoint{} directly", servers.size(),
                 servers.size() == 1 ? "" : "s");
  }
  probe_env_->dns_servers = std::move(servers);
  probe_env_->dns_servers_over_cap = over;
}

std::shared_ptr<probes::ProbeKind> App::MakeKind(const probes::ProbeKindEntry& entry,
                                                 const config::Config& c) {
  auto kind = entry.make(c, *probe_env_);
  return kind && bounded_.wrap ? bounded_.wrap(std::move(kind)) : kind;
}

void App::Route(responders::HttpRequest req, responders::HttpRespond respond) {
  PODNET_DCHECK_LOOP(kResponder);
  std::string path = req.target.substr(0, req.target.find('?'));
  if (!OpenPath(path)) {
    if (tls_ && !req.tls) {  // as Go's net/http answers plain HTTP on a TLS port
      respond(
          {400, "text/plain; charset=utf-8", "Client sent an HTTP request to an HTTPS server.\n"});
      return;
    }
    if (auth_) {
      auto d = auth_->Admit(req.authorization, req.remote, std::chrono::steady_clock::now());
      if (d.verdict == web::AuthGate::Verdict::kCheck) {
        CheckCredentials(std::move(d), std::move(req), std::move(path), std::move(respond));
        return;
      }
      if (d.verdict != web::AuthGate::Verdict::kAllowed) {
        respond(AuthRefusal(d));
        return;
      }
    }
  }
  RouteAuthorized(std::move(req), std::move(path), std::move(respond));
}

void App::CheckCredentials(web::AuthGate::Decision d, responders::HttpRequest req, std::string path,
                           responders::HttpRespond respond) {
  PODNET_DCHECK_LOOP(kResponder);
  bool first = d.first;
  auto job = [this, d = std::move(d), req = std::move(req), path = std::move(path),
              respond]() mutable {
    PODNET_DCHECK_NOT_LOOP(kResponder);
    PODNET_DCHECK_NOT_LOOP(kControl);
    bool good = web::BasicAuth::Matches(d.password, d.hash);
    boost::asio::post(respond_io_, [this, good, key = std::move(d.key), req = std::move(req),
                                    path = std::move(path), respond]() mutable {
      auth_->Checked(key, good);
      if (!good) {
        web::AuthGate::Decision wrong;
        wrong.verdict = web::AuthGate::Verdict::kCheck;  // a check that failed
        respond(AuthRefusal(wrong));
        return;
      }
      RouteAuthorized(std::move(req), std::move(path), std::move(respond));
    });
  };
  // A quiet source's check goes first, in one of the places kept for those (auth_gate.h).
  bool posted = first ? auth_worker_->TryPostFirst(std::move(job), auth_->limits().quiet_pending)
                      : auth_worker_->TryPost(std::move(job));
  if (!posted) {  // not expected: the gate keeps at most the worker's capacity pending
    auth_->Cancelled();
    web::AuthGate::Decision busy;
    busy.verdict = web::AuthGate::Verdict::kRateLimited;
    busy.retry_after_seconds = 1;
    respond(AuthRefusal(busy));
  }
}

responders::HttpResponse App::AuthRefusal(const web::AuthGate::Decision& d) {
  PODNET_DCHECK_LOOP(kResponder);
  if (auto* c = auth_failures_[static_cast<std::size_t>(d.verdict)]) c->Increment();
  if (d.verdict == web::AuthGate::Verdict::kSourceLimited ||
      d.verdict == web::AuthGate::Verdict::kRateLimited) {
    // Not checked, so neither wrong nor right: come back later (web/auth_gate.h).
    responders::HttpResponse busy{429, "text/plain; charset=utf-8",
                                  "too many password checks; retry later\n"};
    busy.headers.emplace_back("Retry-After", std::to_string(d.retry_after_seconds));
    return busy;
  }
  responders::HttpResponse denied{401, "text/plain; charset=utf-8", "Unauthorized\n"};
  denied.headers.emplace_back("WWW-Authenticate", "Basic realm=\"podnet-exporter\"");
  return denied;
}

void App::RouteAuthorized(responders::HttpRequest req, std::string path,
                          responders::HttpRespond respond) {
  PODNET_DCHECK_LOOP(kResponder);
  bool get = req.method == "GET" || req.method == "HEAD";
  // What peers and the kubelet time is answered here, from constants and atomics only.
  if (path == "/echo" && (get || req.method == "POST")) {
    http_echo_answered_.Increment();
    responders::HttpResponse echo{200, "text/plain; charset=utf-8", kEchoBody};
    echo.headers = echo_identity_headers_;
    respond(std::move(echo));
    return;
  }
  if (path == "/-/healthy" && get) {
    respond({200, "text/plain; charset=utf-8", "Healthy.\n"});
    return;
  }
  if (path == "/-/ready" && get && ready_ && !discovery_unsynced_) {
    respond({200, "text/plain; charset=utf-8", "Ready.\n"});
    return;
  }  // not ready: why is the control loop's to say (it owns discovery), below
  if (path == "/" && get) {
    static const std::string kLanding = LandingPage();
    respond({200, "text/html; charset=utf-8", kLanding});
    return;
  }
  if (path == "/-/reload" && (req.method == "POST" || req.method == "PUT")) {
    RequestReload(std::move(respond));
    return;
  }
  if (path == "/-/reload") {
    respond({405, "text/plain; charset=utf-8", "Only POST or PUT requests allowed.\n"});
    return;
  }
  if (path != "/metrics" && path != "/podnet/info" && !(path == "/-/ready" && get)) {
    respond({404, "text/plain; charset=utf-8", "404 page not found\n"});
    return;
  }
  // The rest is built on the control loop and written back here (HttpRespond).
  boost::asio::post(control_io_, [this, req = std::move(req), path = std::move(path),
                                  respond = std::move(respond)]() mutable {
    if (path == "/metrics" && req.method == "GET") {
      QueueScrape(req.accepts_gzip, std::move(respond));
      return;
    }
    respond(RouteControlGuarded(req, path));
  });
}

void App::QueueScrape(bool gzip, responders::HttpRespond respond) {
  PODNET_DCHECK_LOOP(kControl);
  pending_scrapes_.push_back({gzip, std::move(respond)});
  if (pending_scrapes_.size() == 1) boost::asio::post(control_io_, [this] { ServeScrapes(); });
}

void App::ServeScrapes() {
  PODNET_DCHECK_LOOP(kControl);
  auto batch = std::move(pending_scrapes_);
  pending_scrapes_.clear();
  std::shared_ptr<const std::string> text[2];  // identity, gzip: each built once for the batch
  for (auto& scrape : batch) {
    responders::HttpResponse resp{200, "text/plain; version=0.0.4; charset=utf-8", ""};
    try {
      auto& body = text[scrape.gzip];
      if (!body) {
        body = std::make_shared<const std::string>(
            metrics_.Serialize(scrape.gzip ? metrics::Metrics::Encoding::kGzip
                                           : metrics::Metrics::Encoding::kIdentity));
      }
      resp.shared_body = body;
      if (scrape.gzip) resp.content_encoding = "gzip";
    } catch (const std::exception& e) {
      spdlog::error("http: /metrics failed: {}", e.what());
      resp = {500, "text/plain; charset=utf-8", "internal error\n"};
    }
    scrape.respond(std::move(resp));
  }
}

responders::HttpResponse App::RouteControlGuarded(const responders::HttpRequest& req,
                                                  const std::string& path) {
  try {
    return RouteControl(req, path);
  } catch (const std::exception& e) {
    spdlog::error("http: handler for {} failed: {}", req.target, e.what());
    return {500, "text/plain; charset=utf-8", "internal error\n"};
  }
}

void App::RequestReload(responders::HttpRespond respond) {
  PODNET_DCHECK_LOOP(kResponder);
  if (reload_pacer_->full()) {
    reload_refused_->Increment();
    responders::HttpResponse busy{429, "text/plain; charset=utf-8",
                                  "too many reload requests waiting; retry later\n"};
    busy.headers.emplace_back("Retry-After", "1");
    respond(std::move(busy));
    return;
  }
  reload_pacer_->Request(std::move(respond));
}

void App::RunReload(ReloadPacer::Batch batch) {
  PODNET_DCHECK_LOOP(kControl);
  responders::HttpResponse resp{200, "text/plain; charset=utf-8", "Reloaded.\n"};
  try {
    if (std::string err; !Reload(&err)) {
      resp = {500, "text/plain; charset=utf-8",
              "reload failed, running configuration kept:\n" + err};
    }
  } catch (const std::exception& e) {
    spdlog::error("reload failed: {}", e.what());
    resp = {500, "text/plain; charset=utf-8", "internal error\n"};
  }
  for (auto& respond : batch) respond(resp);
  boost::asio::post(respond_io_, [this] { reload_pacer_->Finished(); });
}

responders::HttpResponse App::RouteControl(const responders::HttpRequest& req,
                                           const std::string& path) {
  PODNET_DCHECK_LOOP(kControl);
  bool get = req.method == "GET" || req.method == "HEAD";
  if (path == "/metrics") {
    // GET (and HEAD, which arrives as GET) is served by QueueScrape.
    return {405, "text/plain; charset=utf-8", "Only GET or HEAD requests allowed.\n"};
  }
  if (path == "/-/ready") {  // not ready (Route answers "ready" itself): say why
    std::string why = NotReadyReason();
    if (why.empty()) return {200, "text/plain; charset=utf-8", "Ready.\n"};
    return {503, "text/plain; charset=utf-8", "Not ready: " + why + ".\n"};
  }
  if (path == "/podnet/info" && get) {
    std::shared_ptr<const config::Config> c;
    {
      std::lock_guard lock(config_mu_);
      c = config_;
    }
    std::string zone = c->self.zone;
    if (zone.empty() && discovery_) zone = discovery_->snapshot().self_zone;
    return {200, "application/json", InfoJson(c->self.name, c->self.node, zone)};
  }
  return {404, "text/plain; charset=utf-8", "404 page not found\n"};
}

}  // namespace podnet::app
