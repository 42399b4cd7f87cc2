#include "exporter/probes/registry.h"

#include <array>

#include "exporter/probes/dns/dns_probe.h"
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
      {"dns",
       [](const config::Config& c, ProbeEnv& env) -> std::shared_ptr<ProbeKind> {
         if (!c.dns) return nullptr;
         return dns::MakeDnsKind(*c.dns, env);
       },
       [](const config::Config& a, const config::Config& b) { return a.dns != b.dns; }},
  }};
  return kKinds;
}

}  // namespace podnet::probes
