#include "exporter/probes/registry.h"

#include <vector>

#include "exporter/probes/http/http_probe.h"
#ifdef PODNET_WITH_GRPC
#include "exporter/probes/grpc/grpc_probe.h"
#endif
#include "exporter/probes/rtt/rtt_probe.h"

namespace podnet::probes {

std::span<const ProbeKindEntry> ProbeKinds() {
  static const std::vector<ProbeKindEntry> kKinds{
      {"rtt",
       [](const config::Config& c, ProbeEnv& env) -> std::shared_ptr<ProbeKind> {
         if (!c.rtt) return nullptr;
         return rtt::MakeRttKind(*c.rtt, env);
       },
       [](const config::Config& a, const config::Config& b) { return a.rtt != b.rtt; }},
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
  };
  return kKinds;
}

}  // namespace podnet::probes
