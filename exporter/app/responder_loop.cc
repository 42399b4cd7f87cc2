#include "exporter/app/responder_loop.h"

#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "exporter/responders/responder_metrics.h"
#include "exporter/wire/echo.h"
#include "podnet/version.h"

namespace podnet::app {
namespace {

// nice(2) of the thread that runs bcrypt checks where SCHED_IDLE cannot be had: the lowest, so
// that a flood's checks (at most 2 a second) take CPU from no loop, not even a scrape's.
constexpr int kAuthWorkerNice = 19;

// /-/reload: at most one reload per interval; at most this many requests wait for the next.
constexpr auto kReloadInterval = std::chrono::seconds(1);
constexpr std::size_t kMaxReloadWaiting = 16;

// podnet_responder_probers is rewritten this often: a fraction of its 5-minute window, and
// cheap (one pass over the known probe Pods).
constexpr auto kProberPublishInterval = std::chrono::seconds(15);

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

// Runs `bind` (which creates one listener and returns its bound port) and logs the outcome:
// "listening on ADDRESS (WHAT)", or one error line naming WHAT, the address, the config `key`
// and the reason. False when it threw.
bool Listen(std::string_view what, std::string_view key, const net::HostPort& at,
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

}  // namespace

ResponderLoop::ResponderLoop(metrics::Metrics& metrics, std::shared_ptr<const web::WebConfig> web,
                             ControlHooks control)
    : metrics_(metrics),
      web_(std::move(web)),
      control_(std::move(control)),
      http_echo_answered_(responders::ResponderRequests(metrics.registry())
                              .Add({{"responder", "http_echo"}, {"result", "answered"}})),
      reload_pacer_(io_, kReloadInterval, kMaxReloadWaiting,
                    [this](ReloadPacer::Batch batch) { control_.reload(std::move(batch)); }),
      probers_(metrics.registry()) {
  if (web_ && !web_->users.empty()) SetUpAuth(metrics.registry());
  // The HTTP server's own reasons are in the same family (responders/http_server.h).
  reload_refused_ = &responders::ResponderDropped(metrics.registry())
                         .Add({{"responder", "http"}, {"reason", "reload_queue_full"}});
}

ResponderLoop::~ResponderLoop() { Shutdown(); }

void ResponderLoop::Start() {
  boost::asio::post(io_, [this] { PublishProbers(); });
  thread_.Start();
}

void ResponderLoop::PublishProbers() {
  probers_.Publish(std::chrono::steady_clock::now());
  probers_timer_.expires_after(kProberPublishInterval);
  probers_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) PublishProbers();
  });
}

void ResponderLoop::SetUpAuth(prometheus::Registry& registry) {
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
                     .Register(registry);
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

bool ResponderLoop::Bind(const config::Config& config, const net::HostPort& listen,
                         std::string_view listen_key, std::shared_ptr<web::TlsContextSource> tls) {
  tls_ = std::move(tls);
  // Each listener binds on its own, and a failure names that listener's key and address: a
  // taken port must point at the setting to change, not at a neighbour.
  bool bound =
      Listen("HTTP", listen_key, listen,
             [&] {
               http_ = std::make_unique<responders::HttpServer>(
                   io_, listen,
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
                   io_, config.udp_echo_listen_address, metrics_.registry());
               udp_echo_->SetHeardHook(ProberHeardHook());
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
                                 *config.grpc_listen_address, metrics_.registry(),
                                 responders::GrpcConnectionLimits{}, ProberHeardHook());
                             return grpc_health_->port();
                           }));
#endif
  return bound;
}

void ResponderLoop::Shutdown() {
  // The responders go with their loop: stopped first, then destroyed after their thread ended
  // (nothing of theirs runs any more).
  thread_.Join();
  auth_worker_.reset();  // a check still running posts to a loop that no longer runs
  http_.reset();
  udp_echo_.reset();
}

void ResponderLoop::SetIdentity(const topology::Self& self) {
  boost::asio::post(io_, [this, self] {
    echo_identity_headers_ = {{std::string(wire::echo::kNodeHeader), self.node},
                              {std::string(wire::echo::kZoneHeader), self.zone}};
    if (udp_echo_) udp_echo_->SetIdentity(self.node, self.zone, self.name);
    probers_.SetSelf(self.node, self.zone);
  });
}

void ResponderLoop::SetProbePods(std::vector<responders::KnownProber> pods) {
  boost::asio::post(io_, [this, pods = std::move(pods)] {
    probers_.SetProbers(pods);
    probers_.Publish(std::chrono::steady_clock::now());  // a new zone's series at once
    if (!burst_) return;
    std::vector<boost::asio::ip::address> sources;
    sources.reserve(pods.size());
    for (const auto& p : pods) sources.push_back(p.address);
    burst_->AdmitSources(std::move(sources));
  });
}

responders::HeardHook ResponderLoop::ProberHeardHook() {
  return [this](const boost::asio::ip::address& source) {
    probers_.Heard(source, std::chrono::steady_clock::now());
  };
}

void ResponderLoop::ReloadFinished() {
  boost::asio::post(io_, [this] { reload_pacer_.Finished(); });
}

void ResponderLoop::Route(responders::HttpRequest req, responders::HttpRespond respond) {
  PODNET_DCHECK_LOOP(kResponder);
  const HttpRoute* route =
      FindHttpRoute(std::string_view(req.target).substr(0, req.target.find('?')));
  if (route == nullptr || !route->open) {  // an unknown path is answered 404 only past the gate
    if (tls_ && !req.tls) {                // as Go's net/http answers plain HTTP on a TLS port
      respond(
          {400, "text/plain; charset=utf-8", "Client sent an HTTP request to an HTTPS server.\n"});
      return;
    }
    if (auth_) {
      auto d = auth_->Admit(req.authorization, req.remote, std::chrono::steady_clock::now());
      if (d.verdict == web::AuthGate::Verdict::kCheck) {
        CheckCredentials(std::move(d), std::move(req), route, std::move(respond));
        return;
      }
      if (d.verdict != web::AuthGate::Verdict::kAllowed) {
        respond(AuthRefusal(d));
        return;
      }
    }
  }
  RouteAuthorized(std::move(req), route, std::move(respond));
}

void ResponderLoop::CheckCredentials(web::AuthGate::Decision d, responders::HttpRequest req,
                                     const HttpRoute* route, responders::HttpRespond respond) {
  PODNET_DCHECK_LOOP(kResponder);
  bool first = d.first;
  auto job = [this, d = std::move(d), req = std::move(req), route, respond]() mutable {
    PODNET_DCHECK_NOT_LOOP(kResponder);
    PODNET_DCHECK_NOT_LOOP(kControl);
    bool good = web::BasicAuth::Matches(d.password, d.hash);
    boost::asio::post(
        io_, [this, good, key = std::move(d.key), req = std::move(req), route, respond]() mutable {
          auth_->Checked(key, good);
          if (!good) {
            web::AuthGate::Decision wrong;
            wrong.verdict = web::AuthGate::Verdict::kCheck;  // a check that failed
            respond(AuthRefusal(wrong));
            return;
          }
          RouteAuthorized(std::move(req), route, std::move(respond));
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

responders::HttpResponse ResponderLoop::AuthRefusal(const web::AuthGate::Decision& d) {
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

void ResponderLoop::RouteAuthorized(responders::HttpRequest req, const HttpRoute* route,
                                    responders::HttpRespond respond) {
  PODNET_DCHECK_LOOP(kResponder);
  if (route == nullptr) {
    respond({404, "text/plain; charset=utf-8", "404 page not found\n"});
    return;
  }
  if (!HttpRouteAllows(*route, req.method)) {
    respond(MethodNotAllowed(*route));
    return;
  }
  if (route->loop == HttpLoop::kControl) {  // built there, written back here (HttpRespond)
    control_.serve(std::move(req), route->id, std::move(respond));
    return;
  }
  // What peers and the kubelet time is answered here, from constants and atomics only.
  switch (route->id) {
    case HttpRouteId::kEcho: {
      http_echo_answered_.Increment();
      probers_.Heard(req.remote, std::chrono::steady_clock::now());
      responders::HttpResponse echo{200, "text/plain; charset=utf-8", kEchoBody};
      echo.headers = echo_identity_headers_;
      respond(std::move(echo));
      return;
    }
    case HttpRouteId::kHealthy:
      respond({200, "text/plain; charset=utf-8", "Healthy.\n"});
      return;
    case HttpRouteId::kLanding: {
      static const std::string kLanding = LandingPage();
      respond({200, "text/html; charset=utf-8", kLanding});
      return;
    }
    case HttpRouteId::kReload:
      RequestReload(std::move(respond));
      return;
    case HttpRouteId::kReady:
      if (ready_) {
        respond({200, "text/plain; charset=utf-8", "Ready.\n"});
      } else {  // why not is the control loop's to say (it owns discovery)
        control_.serve(std::move(req), route->id, std::move(respond));
      }
      return;
    case HttpRouteId::kMetrics:
    case HttpRouteId::kInfo:
      break;  // HttpLoop::kControl, above
  }
}

void ResponderLoop::RequestReload(responders::HttpRespond respond) {
  PODNET_DCHECK_LOOP(kResponder);
  if (reload_pacer_.full()) {
    reload_refused_->Increment();
    responders::HttpResponse busy{429, "text/plain; charset=utf-8",
                                  "too many reload requests waiting; retry later\n"};
    busy.headers.emplace_back("Retry-After", "1");
    respond(std::move(busy));
    return;
  }
  reload_pacer_.Request(std::move(respond));
}

}  // namespace podnet::app
