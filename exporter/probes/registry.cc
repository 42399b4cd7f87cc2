#include "exporter/probes/registry.h"

#include <vector>

#include "exporter/probes/burst/burst_probe.h"
#include "exporter/probes/dns/dns_probe.h"
#include "exporter/probes/http/http_probe.h"
#ifdef PODNET_WITH_GRPC
#include "exporter/probes/grpc/grpc_probe.h"
#endif
#include "exporter/probes/rtt/rtt_probe.h"
#include "exporter/probes/service/service_probe.h"

namespace podnet::probes {

std::span<const ProbeKindEntry> ProbeKinds() {
  static const std::vector<ProbeKindEntry> kKinds{
      {"rtt",
       [](const config::Config& c, ProbeEnv& env) -> std::shared_ptr<ProbeKind> {
         if (!c.rtt) return nullptr;
         return rtt::MakeRttKind(*c.rtt, env);
       },
       [](const config::Config& a, const config::Config& b) { return a.rtt != b.rtt; }},
      {"dns",
       [](const config::Config& c, ProbeEnv& env) -> std::shared_ptr<ProbeKind> {
         if (!c.dns) return nullptr;
         return dns::MakeDnsKind(*c.dns, env);
       },
       [](const config::Config& a, const config::Config& b) { return a.dns != b.dns; }},
      {"burst",
       [](const config::Config& c, ProbeEnv& env) -> std::shared_ptr<ProbeKind> {
         if (!c.burst) return nullptr;
         return burst::MakeBurstKind(*c.burst, env);
       },
       [](const config::Config& a, const config::Config& b) { return a.burst != b.burst; }},
      {"http",
       [](const config::Config& c, ProbeEnv& env) -> std::shared_ptr<ProbeKind> {
         if (!c.http) return nullptr;
         return http::MakeHttpKind(*c.http, env);
       },
       [](const config::Config& a, const config::Config& b) { return a.http != b.http; }},
#ifdef PODNET_WITH_GRPC
      {"grpc",
       [](const config::Config& c, ProbeEnv& env) -> std::shared_ptr<ProbeKind> {
         if (!c.grpc) return nullptr;
         return grpc::MakeGrpcKind(*c.grpc, env);
       },
       [](const config::Config& a, const config::Config& b) { return a.grpc != b.grpc; }},
#endif
      {"service",
       [](const config::Config& c, ProbeEnv& env) -> std::shared_ptr<ProbeKind> {
         if (!c.service) return nullptr;
         return service::MakeServiceKind(*c.service, env);
       },
       [](const config::Config& a, const config::Config& b) { return a.service != b.service; }},
  };
  return kKinds;
}

}  // namespace podnet::probes
