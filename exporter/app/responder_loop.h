#pragma once

#include <prometheus/counter.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exporter/app/http_routes.h"
#include "exporter/app/loop_thread.h"
#include "exporter/app/reload_pacer.h"
#include "exporter/config/config.h"
#include "exporter/metrics/metrics.h"
#include "exporter/responders/burst_server.h"
#include "exporter/responders/grpc_health.h"
#include "exporter/responders/http_server.h"
#include "exporter/responders/prober_tally.h"
#include "exporter/responders/udp_echo.h"
#include "exporter/runtime/bounded_worker.h"
#include "exporter/web/auth_gate.h"
#include "exporter/web/tls_context.h"
#include "exporter/web/web_config.h"

namespace podnet::app {

/// The responder loop (docs/design.md, "Thread model"): what peers time against this Pod.
/// It owns the HTTP server's sockets and routing, the UDP echo responder, the identity every
/// answer carries, the basic auth gate and the /-/reload pacer; /echo, /-/healthy, /-/ready
/// and / are answered on it at once, the rest goes to the control loop (ControlHooks) and the
/// finished response comes back here. It keeps the coverage tally (responders::ProberTally)
/// that the UDP echo, HTTP /echo and gRPC health responders feed. It also owns the burst and gRPC
/// health responders, which run on threads of their own. Other threads reach it through SetIdentity
/// and ReloadFinished (each posts to the loop) and SetReady (an atomic).
class ResponderLoop {
 public:
  /// How the responder loop hands work to the control loop; each call posts there.
  struct ControlHooks {
    /// /metrics, /podnet/info and /-/ready when not ready: `req`, whose path is `route`'s and
    /// whose method it takes, answered through `respond`.
    std::function<void(responders::HttpRequest req, HttpRouteId route,
                       responders::HttpRespond respond)>
        serve;
    /// One reload for the requests of `batch`; ReloadFinished() when it is over.
    std::function<void(ReloadPacer::Batch batch)> reload;
  };

  /// `web`: the --web.config.file (basic auth, headers); null for plain HTTP.
  ResponderLoop(metrics::Metrics& metrics, std::shared_ptr<const web::WebConfig> web,
                ControlHooks control);
  ~ResponderLoop();

  /// Binds every listener `config` asks for, HTTP on `listen` (`listen_key`: the setting that
  /// names it, for the error line), with TLS from `tls` when set. False when one cannot be
  /// bound (logged). Before Start().
  bool Bind(const config::Config& config, const net::HostPort& listen, std::string_view listen_key,
            std::shared_ptr<web::TlsContextSource> tls);
  /// Runs the loop on its thread. Stop() is thread-safe.
  void Start();
  void Stop() { io_.stop(); }
  /// Stops the loop and waits for it, then closes the HTTP and UDP echo listeners (no peer is
  /// answered by a half-torn-down server).
  void Shutdown();

  /// Thread-safe, posted: who answers, in every /echo response (wire/echo.h: kNodeHeader,
  /// kZoneHeader: node and zone) and UDP echo reply (node, zone and Pod name).
  void SetIdentity(const topology::Self& self);
  /// Thread-safe, posted: the probe Pods from now on: the sources the burst responder admits
  /// (BurstResponder::AdmitSources) and those whose requests count as coverage (ProberTally,
  /// published at once and every 15 s).
  void SetProbePods(std::vector<responders::KnownProber> pods);
  /// Thread-safe, posted: the reload ControlHooks::reload began is over.
  void ReloadFinished();
  /// Thread-safe (an atomic): whether /-/ready answers "Ready." at once; when not, the control
  /// loop says why.
  void SetReady(bool ready) { ready_ = ready; }

 private:
  // Finds the request's route (http_routes.h); past the TLS and basic auth checks unless the
  // route is open, RouteAuthorized.
  void Route(responders::HttpRequest req, responders::HttpRespond respond);
  // A bcrypt check for `d` (AuthGate::Verdict::kCheck) on auth_worker_, then RouteAuthorized
  // or 401 back on this loop. `route`: null for a path that has none (404 once admitted).
  void CheckCredentials(web::AuthGate::Decision d, responders::HttpRequest req,
                        const HttpRoute* route, responders::HttpRespond respond);
  // The 401 or 429 for a request basic auth refused (`d`), counted.
  responders::HttpResponse AuthRefusal(const web::AuthGate::Decision& d);
  // Route's part after the TLS and basic auth checks: 404 without a route, 405 for a method
  // it does not take; answers /echo, health, / and /-/reload here, posts the rest to the
  // control loop.
  void RouteAuthorized(responders::HttpRequest req, const HttpRoute* route,
                       responders::HttpRespond respond);
  // What the UDP echo and gRPC health responders call for each request served: probers_.Heard.
  responders::HeardHook ProberHeardHook();
  // Writes podnet_responder_probers now and every kProberPublishInterval after.
  void PublishProbers();
  // Queues a /-/reload request (reload_pacer_), or refuses it when too many wait.
  void RequestReload(responders::HttpRespond respond);
  // The auth gate, its worker and podnet_web_auth_failures_total, for basic_auth_users.
  void SetUpAuth(prometheus::Registry& registry);

  boost::asio::io_context io_;
  metrics::Metrics& metrics_;
  std::shared_ptr<const web::WebConfig> web_;
  ControlHooks control_;
  std::shared_ptr<web::TlsContextSource> tls_;  // the control loop re-reads its files
  // With basic_auth_users: the decision per request and the one thread that runs bcrypt checks
  // (web/auth_gate.h: at most 2 a second, 4 queued; never on a loop). Jobs post to io_.
  std::unique_ptr<web::AuthGate> auth_;
  std::unique_ptr<runtime::BoundedWorker> auth_worker_;
  // podnet_web_auth_failures_total{reason}, indexed by AuthGate::Verdict (kAllowed and
  // kCheck unused; kCheck's slot counts "wrong_credentials": a check that failed).
  std::vector<prometheus::Counter*> auth_failures_;
  // podnet_responder_requests_total{responder="http_echo",result="answered"}: /echo requests.
  prometheus::Counter& http_echo_answered_;
  // /-/reload requests: a reload starts at most once a second; up to 16 requests wait
  // meanwhile (more get 429) and all share the next reload (reload_pacer.h).
  ReloadPacer reload_pacer_;
  prometheus::Counter* reload_refused_ = nullptr;
  // Set from the effective self by the probe loop (SetIdentity).
  std::vector<std::pair<std::string, std::string>> echo_identity_headers_;
  std::atomic<bool> ready_{false};
  // Coverage: the probe Pods heard by the UDP echo, HTTP /echo and gRPC health responders.
  responders::ProberTally probers_;
  boost::asio::steady_timer probers_timer_{io_};

  std::unique_ptr<responders::HttpServer> http_;
  std::unique_ptr<responders::UdpEchoResponder> udp_echo_;
  std::unique_ptr<responders::BurstResponder> burst_;  // own thread (see burst_server.h)
#ifdef PODNET_WITH_GRPC
  std::unique_ptr<responders::GrpcHealthServer> grpc_health_;  // responders.grpc, if set
#endif
  LoopThread thread_{io_, runtime::Loop::kResponder, "responder"};
};

}  // namespace podnet::app
