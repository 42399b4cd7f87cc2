#include "exporter/probes/registry.h"

#include <array>

#include "exporter/probes/dns/dns_probe.h"
#include "exporter/probes/burst/burst_probe.h"
#include "exporter/probes/rtt/rtt_probe.h"

namespace podnet::probes {

std::span<const ProbeKindEntry> ProbeKinds() {
  static const std::array<ProbeKindEntry, 3> kKinds{{
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
  }};
  return kKinds;
}

}  // namespace podnet::probes
