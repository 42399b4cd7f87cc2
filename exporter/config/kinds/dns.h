#pragma once

// probes.dns: its options, decoder and metric families (the probe and the resolver models:
// probes/dns/).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/config/kinds/section.h"
#include "exporter/config/units.h"

namespace podnet::config::kinds::dns {

/// The stub resolver a model follows (probes.dns.resolvers).
enum class Libc { kGlibc, kMusl };
const char* LibcName(Libc l);                       // "glibc" | "musl"
std::optional<Libc> ParseLibc(std::string_view s);  // inverse of LibcName

/// probes.dns.cluster_dns: with peers.kubernetes, the cluster DNS Service whose endpoints (its
/// EndpointSlices, label kubernetes.io/service-name) are each asked directly, so that
/// podnet_dns_server_rtt_seconds shows every replica with its zone and path class. Read through
/// the same API server and credentials as peers.kubernetes.
struct ClusterDnsOptions {
  std::string namespace_name = "kube-system";  // `namespace` in YAML
  std::string service = "kube-dns";  // CoreDNS keeps the kube-dns name in every standard install
  std::uint16_t port = 53;           // the replicas' DNS port (the Service's targetPort)
  /// At most this many endpoints are asked (one per zone in turn, by Pod name within a zone);
  /// the rest are counted as podnet_probe_errors_total{probe="dns",reason="servers_over_cap"}.
  int max_servers = 16;

  bool operator==(const ClusterDnsOptions&) const = default;
};

/// probes.dns.sample: with peers.kubernetes, the Pods that run the lookups and the Pods that
/// time each cluster DNS replica directly: `pods_per_zone` and `replica_pods_per_zone` Pods of
/// each zone, the first of one draw made again every `period` by rendezvous hashing
/// (topology::InZoneSample) over the discovered probe Pods. The amplification a lookup measures
/// is the resolv.conf's and the libc's, the same from every Pod of a DaemonSet, and a replica's
/// fault rules want a few probers from each zone, not every node: a few Pods per zone measure
/// both at a load on CoreDNS that does not grow with the cluster. Every Pod still times
/// resolv.conf's nameservers (its own path to the cluster DNS).
struct DnsSampleOptions {
  int pods_per_zone = 2;                    // run the lookups
  Duration period = std::chrono::hours(1);  // at least the interval (1h or it, default)
  int replica_pods_per_zone = 6;            // ask each replica directly

  bool operator==(const DnsSampleOptions&) const = default;
};

/// probes.dns: every `interval`, each name is looked up as written and in its absolute form
/// (a trailing dot), once per resolver model, under the resolv.conf at `resolv_conf` (re-read
/// every round, as the libcs notice a changed file); and each nameserver of that file, and each
/// discovered cluster DNS endpoint (`cluster_dns`, with peers.kubernetes), is asked directly for
/// the first name's absolute form (podnet_dns_server_rtt_seconds).
struct DnsOptions {
  Duration interval = std::chrono::seconds(30);
  std::string resolv_conf = "/etc/resolv.conf";
  std::vector<Libc> resolvers{Libc::kGlibc, Libc::kMusl};
  std::vector<std::string> names;
  /// On by default with peers.kubernetes; std::nullopt without it or with `cluster_dns: false`.
  std::optional<ClusterDnsOptions> cluster_dns = ClusterDnsOptions{};
  /// On by default with peers.kubernetes; std::nullopt (every Pod runs the lookups) without it
  /// or with `sample: false`.
  std::optional<DnsSampleOptions> sample = DnsSampleOptions{};

  bool operator==(const DnsOptions&) const = default;
};

/// Reads probes.dns (the keys: docs/configuration.md) into c.dns; cluster_dns and sample are on by
/// default only with peers.kubernetes (ctx.kubernetes), an error when asked for without it.
void Decode(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c);

/// The metric families the kind exports (its probe declares them: metrics::Declare*).
inline constexpr FamilyDecl kFamilies[] = {
    {"podnet_dns_lookup_duration_seconds"}, {"podnet_dns_lookup_sampled"},
    {"podnet_dns_lookups_total"},           {"podnet_dns_queries_per_lookup"},
    {"podnet_dns_queries_total"},           {"podnet_dns_responses_total"},
    {"podnet_dns_server_rtt_seconds"},
};

}  // namespace podnet::config::kinds::dns
