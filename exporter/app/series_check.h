#pragma once

#include <cstddef>
#include <string>

#include "exporter/config/config.h"

namespace podnet::app {

/// Zones and CoreDNS replicas --config.check assumes where discovery decides (peers.kubernetes,
/// probes.dns.cluster_dns): a 3-zone region, CoreDNS's default 2 replicas.
inline constexpr int kAssumedZones = 3;
inline constexpr int kAssumedClusterDnsReplicas = 2;

/// What --config.check prints about the series a Pod of `c` exports: the total and the
/// families that make it up, largest first, e.g.
///   "series per Pod: ~852 (792 of the probes + ~60 others) for 9 peers ...\n  podnet_... 204\n".
/// Peers: the static ones (classified from `c.self`), plus with peers.kubernetes peers_per_zone
/// in each of kAssumedZones zones (one of them this Pod's). DNS servers: the nameservers of
/// probes.dns.resolv_conf as glibc reads it (one when unreadable) plus, with cluster_dns, the
/// smaller of max_servers and kAssumedClusterDnsReplicas; where max_servers is larger, one more
/// line gives the series each further replica adds and the total at max_servers replicas (the
/// bound for any cluster). Never fails.
std::string SeriesCheck(const config::Config& c);

/// SeriesCheck's total: the series a Pod of `c` exports, its own included (for `report`).
std::size_t SeriesPerPod(const config::Config& c);

}  // namespace podnet::app
