#include "exporter/probes/registry.h"

#include <array>

#include "exporter/probes/http/http_probe.h"
#include "exporter/probes/rtt/rtt_probe.h"

namespace podnet::probes {

std::span<const ProbeKindEntry> ProbeKinds() {
  static const std::array<ProbeKindEntry, 2> kKinds{{
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
  }};
  return kKinds;
}

}  // namespace podnet::probes
