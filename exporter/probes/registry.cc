#include "exporter/probes/registry.h"

#include <vector>

#include "exporter/probes/burst/burst_probe.h"
#include "exporter/probes/dns/dns_probe.h"
#include "exporter/probes/http/http_probe.h"
#include "exporter/probes/mtu/mtu_probe.h"
#ifdef PODNET_WITH_GRPC
#include "exporter/probes/grpc/grpc_probe.h"
#endif
#include "exporter/probes/rtt/rtt_probe.h"
#include "exporter/probes/service/service_probe.h"

namespace podnet::probes {
namespace {

// The row of kind `name`, whose options are the Config member `Options` (absent: the kind is
// off), which `Make` builds from them and whose series `Count` counts.
template <auto Options, auto Make, auto Count>
ProbeKindEntry Kind(std::string_view name) {
  return {name,
          [](const config::Config& c, ProbeEnv& env) -> std::shared_ptr<ProbeKind> {
            const auto& options = c.*Options;
            return options ? Make(*options, env) : nullptr;
          },
          [](const config::Config& a, const config::Config& b) { return a.*Options != b.*Options; },
          [](const config::Config& c) { return (c.*Options).has_value(); },
          [](const config::Config& c, SeriesCounter& n) { return Count(c, n); }};
}

}  // namespace

std::span<const ProbeKindEntry> ProbeKinds() {
  using config::Config;
  static const std::vector<ProbeKindEntry> kKinds{
      Kind<&Config::rtt, rtt::MakeRttKind, rtt::CountSeries>("rtt"),
      Kind<&Config::dns, dns::MakeDnsKind, dns::CountSeries>("dns"),
      Kind<&Config::burst, burst::MakeBurstKind, burst::CountSeries>("burst"),
      Kind<&Config::http, http::MakeHttpKind, http::CountSeries>("http"),
#ifdef PODNET_WITH_GRPC
      Kind<&Config::grpc, grpc::MakeGrpcKind, grpc::CountSeries>("grpc"),
#endif
      Kind<&Config::service, service::MakeServiceKind, service::CountSeries>("service"),
      Kind<&Config::mtu, mtu::MakeMtuKind, mtu::CountSeries>("mtu"),
  };
  return kKinds;
}

}  // namespace podnet::probes
