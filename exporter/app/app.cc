#include "exporter/app/app.h"

#include <spdlog/spdlog.h>

#include <string>
#include <utility>

namespace podnet::app {

App::App(Options options, std::shared_ptr<const config::Config> config,
         std::shared_ptr<const web::WebConfig> web)
    : options_(std::move(options)),
      probe_(metrics_, {[this](const topology::Self& self) { responder_.SetIdentity(self); },
                        [this](std::vector<responders::KnownProber> pods) {
                          responder_.SetProbePods(std::move(pods));
                        }}),
      responder_(
          metrics_, web,
          {[this](responders::HttpRequest req, HttpRouteId route, responders::HttpRespond respond) {
             control_.Serve(std::move(req), route, std::move(respond));
           },
           [this](ReloadPacer::Batch batch) { control_.RunReload(std::move(batch)); }}),
      control_(options_, std::move(config), std::move(web), metrics_, probe_, responder_) {}

App::~App() = default;

void App::Stop() {
  control_.Stop();
  responder_.Stop();
  probe_.Stop();
}

int App::Run() {
  auto config = control_.config();
  std::shared_ptr<web::TlsContextSource> tls;
  if (!control_.LoadTls(&tls)) return 2;
  net::HostPort listen = options_.listen_address.value_or(config->listen_address);
  const char* listen_key = options_.listen_address ? "--web.listen-address" : "listen_address";
  if (!bounded_.wrap && !responder_.Bind(*config, listen, listen_key, tls)) return 1;
  probe_.SetWrap(bounded_.wrap);
  probe_.SetDiscoveredHook(bounded_.discovered);
  probe_.Apply(config);
  if (bounded_.start) probe_.PostStart(bounded_.start);
  if (std::string err; !control_.StartDiscovery(&err)) {
    spdlog::error("peers.kubernetes: {}", err);
    return 2;
  }
  control_.CatchSignals();  // before /-/healthy answers: SIGTERM then always exits 0
  probe_.Start();
  responder_.Start();
  control_.Run();  // until Stop()
  responder_.Shutdown();
  probe_.Join();
  control_.Release();
  return 0;
}

}  // namespace podnet::app
