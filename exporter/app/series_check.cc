#include "exporter/app/series_check.h"

#include <algorithm>
#include <sstream>

#include "exporter/discovery/static_peers.h"
#include "exporter/probes/dns/resolv_conf.h"
#include "exporter/probes/series_estimate.h"

namespace podnet::app {

namespace {

// Stand-ins for the Pods discovery would select: peers_per_zone in each assumed zone.
std::vector<topology::Peer> AssumedKubernetesPeers(const config::Config& c) {
  std::vector<topology::Peer> peers;
  for (int z = 0; z < kAssumedZones; ++z) {
    std::string zone = z == 0 ? c.self.zone : "other-zone-" + std::to_string(z);
    for (int i = 0; i < c.kubernetes->peers_per_zone; ++i) {
      topology::Peer p;
      p.name = zone + "-" + std::to_string(i);
      p.zone = zone;
      p.path = z == 0 ? topology::PathClass::kSameZone : topology::PathClass::kCrossZone;
      peers.push_back(std::move(p));
    }
  }
  return peers;
}

// The shape SeriesCheck assumes for `c`, and in `why` the words that say so; `replicas` cluster
// DNS replicas (at most max_servers) instead of kAssumedClusterDnsReplicas when given.
probes::SeriesShape AssumedShape(const config::Config& c, std::ostringstream& why,
                                 int replicas = kAssumedClusterDnsReplicas) {
  probes::SeriesShape shape;
  shape.peers = discovery::StaticPeers(c.self, c.static_peers);
  why << shape.peers.size() << " static peer(s)";
  if (c.kubernetes) {
    auto k8s = AssumedKubernetesPeers(c);
    why << " + " << k8s.size() << " from peers.kubernetes (peers_per_zone "
        << c.kubernetes->peers_per_zone << " x " << kAssumedZones << " zones, assumed)";
    shape.peers.insert(shape.peers.end(), k8s.begin(), k8s.end());
    shape.zones = kAssumedZones;
  }
  if (c.dns) {
    bool readable = false;
    auto conf = probes::dns::LoadResolvConf(c.dns->resolv_conf, config::kinds::dns::Libc::kGlibc,
                                            {}, &readable);
    shape.dns_servers = std::max<std::size_t>(conf.nameservers.size(), 1);
    why << "; " << shape.dns_servers << " nameserver(s) in " << c.dns->resolv_conf
        << (readable ? "" : " (unreadable here: 1 assumed)");
    if (c.kubernetes && c.dns->cluster_dns) {
      replicas = std::min(c.dns->cluster_dns->max_servers, replicas);
      shape.dns_servers += static_cast<std::size_t>(replicas);
      why << " + " << replicas << " cluster DNS replica(s) (assumed)";
    }
  }
  return shape;
}

}  // namespace

std::size_t SeriesPerPod(const config::Config& c) {
  std::ostringstream why;
  return probes::EstimateSeries(c, AssumedShape(c, why)).total + probes::kBaseSeries;
}

std::string SeriesCheck(const config::Config& c) {
  std::ostringstream why;
  probes::SeriesEstimate e = probes::EstimateSeries(c, AssumedShape(c, why));
  std::sort(e.families.begin(), e.families.end(),
            [](const auto& a, const auto& b) { return a.series > b.series; });
  std::ostringstream out;
  out << "series per Pod: ~" << e.total + probes::kBaseSeries << " (" << e.total
      << " of the probes + ~" << probes::kBaseSeries << " others) for " << why.str()
      << (c.aggregate_peers ? "; histograms per peer zone and path class"
          : c.per_peer_histograms || c.native_histograms
              ? "; histograms per peer"
              : "; histograms per peer zone and path class")
      << "\n";
  if (c.kubernetes && c.dns && c.dns->cluster_dns &&
      c.dns->cluster_dns->max_servers > kAssumedClusterDnsReplicas) {
    // A cluster with more CoreDNS replicas (large clusters scale them with nodes): each one
    // asked adds its server RTT histogram, up to max_servers.
    std::ostringstream unused;
    const int most = c.dns->cluster_dns->max_servers;
    const std::size_t at_most = probes::EstimateSeries(c, AssumedShape(c, unused, most)).total;
    out << "  each further CoreDNS replica: +"
        << (at_most - e.total) / static_cast<std::size_t>(most - kAssumedClusterDnsReplicas)
        << " series; with " << most << " or more (probes.dns.cluster_dns.max_servers): ~"
        << at_most + probes::kBaseSeries << "\n";
  }
  if (c.dns && c.dns->sample) {
    // Only the sampled Pods hold the lookups' series; every Pod times the servers.
    std::size_t lookups = 0;
    for (const auto& f : e.families) {
      if (f.name.rfind("podnet_dns_", 0) == 0 && f.name != "podnet_dns_server_rtt_seconds" &&
          f.name != "podnet_dns_lookup_sampled") {
        lookups += f.series;
      }
    }
    out << "  DNS lookups on " << c.dns->sample->pods_per_zone
        << " Pods a zone (probes.dns.sample): every other Pod ~" << lookups
        << " series fewer; the cluster DNS replicas timed from "
        << c.dns->sample->replica_pods_per_zone
        << " Pods a zone: every other Pod without their podnet_dns_server_rtt_seconds series\n";
  }
  if (c.native_histograms) {
    // Of the others, the 5 start-delay histograms are native too.
    out << "native histograms: ~"
        << e.native_total + probes::kBaseSeries - probes::kBaseStartDelaySeries +
               probes::kBaseStartDelayHistograms
        << " series per Pod where Prometheus ingests them (--enable-feature=native-histograms: "
           "one series a histogram); a text scraper stores the count above\n";
  }
  for (const auto& f : e.families) {
    out << "  " << f.name << " " << f.series;
    if (c.native_histograms && f.stored != f.series) out << " (native: " << f.stored << ")";
    out << "\n";
  }
  return out.str();
}

}  // namespace podnet::app
