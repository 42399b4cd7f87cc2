#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "exporter/config/env.h"
#include "exporter/config/kinds/burst.h"
#include "exporter/config/kinds/dns.h"
#include "exporter/config/kinds/grpc.h"
#include "exporter/config/kinds/http.h"
#include "exporter/config/kinds/mtu.h"
#include "exporter/config/kinds/rtt.h"
#include "exporter/config/kinds/section.h"
#include "exporter/config/kinds/service.h"
#include "exporter/config/metric_families.h"
#include "exporter/config/units.h"
#include "exporter/net/address.h"
#include "exporter/topology/topology.h"

namespace podnet::config {

/// An explicit peer (peers.static[]). `address` is an IP literal.
struct StaticPeer {
  std::string name;
  boost::asio::ip::address address;
  std::uint16_t port = 9479;        // HTTP and UDP echo
  std::uint16_t burst_port = 5201;  // iperf3-compatible burst responder
  std::string node;
  std::string zone;
};

/// peers.kubernetes: discover peers from the EndpointSlices of a Service (label
/// kubernetes.io/service-name) and pick a bounded, topology-aware sample of them.
struct KubernetesPeers {
  std::string namespace_name;       // `namespace` in YAML: where the Service and its slices live
  std::string service;              // the headless Service that selects the probe Pods
  int peers_per_zone = 3;           // per zone (own zone included); same-node peers are always in
  std::uint16_t port = 9479;        // HTTP and UDP echo port of every discovered peer
  std::uint16_t burst_port = 5201;  // burst responder port of every discovered peer
  /// How the probe Pods are found: kWatch lists and watches the Service's EndpointSlices;
  /// kDns asks its DNS records every dns_refresh and each address who it is
  /// (discovery/kubernetes/dns_discovery.h); kAuto takes the DNS records from auto_dns_from
  /// ready probe Pods on and the watch below (discovery/kubernetes/auto_source.h; docs/design.md,
  /// "Discovery at scale").
  enum class Discovery { kWatch, kDns, kAuto };
  Discovery discovery = Discovery::kWatch;
  /// With kAuto: the ready probe Pods (self included) from which the DNS records are taken.
  int auto_dns_from = 100;
  /// The name asked with kDns; "" = SERVICE.NAMESPACE.svc.cluster.local.
  std::string dns_name;
  Duration dns_refresh = std::chrono::seconds(30);

  /// The name kDns asks: dns_name, or the Service's default cluster name.
  std::string DnsName() const {
    return dns_name.empty() ? service + "." + namespace_name + ".svc.cluster.local" : dns_name;
  }

  bool operator==(const KubernetesPeers&) const = default;
};

/// The whole configuration, validated. Shared read-only between threads once loaded.
struct Config {
  std::string file;  // where it was read from
  net::HostPort listen_address{boost::asio::ip::address_v4::any(), 9479};
  topology::Self self;
  net::HostPort udp_echo_listen_address{boost::asio::ip::address_v4::any(), 9479};
  std::vector<StaticPeer> static_peers;
  std::optional<KubernetesPeers> kubernetes;  // peers.kubernetes; absent = static peers only
  /// metrics.aggregate_peers: drop the `peer` and `peer_node` labels so that series are per
  /// (source, peer zone, path class) and cardinality stays bounded on big clusters (docs/design.md,
  /// "Metrics: peer labels and buckets").
  bool aggregate_peers = false;
  /// metrics.per_peer_histograms: latency histograms (RTT, HTTP, gRPC) carry `peer` and
  /// `peer_node` too. Off (the default), they are per (source, peer zone, path class), while
  /// every counter and the RTT round gauges stay per peer: a histogram costs 3 + buckets series
  /// (buckets.h), the bulk of a Pod's series when it is per peer. Never with aggregate_peers.
  bool per_peer_histograms = false;
  /// metrics.native_histograms: every latency histogram also carries native buckets (schema 3,
  /// bounds 9 % apart; metrics/native_histogram.h), sent in the protobuf exposition, and is per
  /// peer like the counters (per group with aggregate_peers): a Prometheus with native histograms
  /// on stores one series per histogram. A scraper of the text format still gets the classic
  /// buckets, per peer.
  bool native_histograms = false;
  /// The metric families turned off (metrics.families: NAME: false; metric_families.h lists the
  /// names and which are off by default). Effective set: the defaults with the file's choices
  /// applied.
  std::set<std::string, std::less<>> families_off = DefaultFamiliesOff();
  std::optional<kinds::rtt::RttOptions> rtt;        // probes.rtt; absent = off
  std::optional<kinds::dns::DnsOptions> dns;        // probes.dns; absent = off
  std::optional<kinds::burst::BurstOptions> burst;  // probes.burst; absent = off
  /// responders.burst (iperf3-compatible server); absent = off.
  std::optional<kinds::burst::BurstResponderOptions> burst_responder;
  std::optional<kinds::http::HttpOptions> http;           // probes.http; absent = off
  std::optional<kinds::grpc::GrpcOptions> grpc;           // probes.grpc; absent = off
  std::optional<net::HostPort> grpc_listen_address;       // responders.grpc; absent = off
  std::optional<kinds::service::ServiceOptions> service;  // probes.service; absent = off
  std::optional<kinds::mtu::MtuOptions> mtu;              // probes.mtu; absent = off
};

namespace kinds {

/// The row of the kind whose options are the Config member `Member` (an std::optional of
/// options with an `interval`).
template <auto Member>
constexpr ProbeSection Section(std::string_view key, decltype(ProbeSection::decode) decode,
                               std::span<const FamilyDecl> families) {
  return {key, decode, [](const Config& c) { return (c.*Member).has_value(); },
          [](Config& c) -> Duration* { return c.*Member ? &(c.*Member)->interval : nullptr; },
          families};
}

}  // namespace kinds

/// The probe kinds' sections of the configuration: one row per kind, beside the member above
/// that it fills, in the order EnabledProbes lists them. The configuration's one list of kinds
/// (the allowed keys under `probes:`, the decoders, the metric family catalog); the probes'
/// code for each: exporter/probes/registry.cc.
inline constexpr kinds::ProbeSection kProbeSections[] = {
    kinds::Section<&Config::rtt>("rtt", kinds::rtt::Decode, kinds::rtt::kFamilies),
    kinds::Section<&Config::http>("http", kinds::http::Decode, kinds::http::kFamilies),
    kinds::Section<&Config::grpc>("grpc", kinds::grpc::Decode, kinds::grpc::kFamilies),
    kinds::Section<&Config::burst>("burst", kinds::burst::Decode, kinds::burst::kFamilies),
    kinds::Section<&Config::dns>("dns", kinds::dns::Decode, kinds::dns::kFamilies),
    kinds::Section<&Config::service>("service", kinds::service::Decode, kinds::service::kFamilies),
    kinds::Section<&Config::mtu>("mtu", kinds::mtu::Decode, kinds::mtu::kFamilies),
};

/// One problem found in a configuration file, e.g.
/// "podnet.yaml:12:7: probes.rtt.interval: must be a positive duration, got \"0s\"".
struct Error {
  std::string file;
  int line = 0;          // 1-based; 0 when the problem is not tied to a place (unreadable file)
  int column = 0;        // 1-based
  std::string key_path;  // e.g. "peers.static[2].address"; empty for syntax errors
  std::string message;

  std::string ToString() const;
};

/// The outcome of a load: a config, or every problem found (never both), and warnings that do
/// not stop it (an unset environment variable expanded to "").
struct LoadResult {
  std::shared_ptr<const Config> config;
  std::vector<Error> errors;
  std::vector<Error> warnings;
  /// Problems found beyond the 100 listed in `errors` (whose last entry then says how many).
  std::size_t not_shown = 0;
  bool ok() const { return config != nullptr; }
  /// Every problem found, listed or not (not counting the "N more" line).
  std::size_t problem_count() const { return errors.size() - (not_shown > 0 ? 1 : 0) + not_shown; }
};

/// Parses and validates YAML text as a podnet-exporter configuration (schema:
/// docs/configuration.md, config/podnet.yaml; docs/design.md "Configuration"). Scalars have
/// `${VAR}` expanded from `env` (see ExpandEnv) before they are interpreted. Unknown keys,
/// duplicate keys, wrong types and out-of-range values are errors. Never throws.
LoadResult Parse(const std::string& text, const std::string& file, const EnvLookup& env);

/// The names of the probe kinds `c` turns on, in kProbeSections' order.
std::vector<std::string> EnabledProbes(const Config& c);

/// One line for --config.check: who this is, every peer source (static count, the Kubernetes
/// Service), every enabled probe and responder; e.g. "self a on node n in zone z; peers: 2
/// static; probes: rtt, dns; responders: http /echo, udp_echo, burst".
std::string Summary(const Config& c);

/// The largest configuration file LoadFile reads: 512 KiB holds thousands of static peers;
/// yaml-cpp takes about 100 bytes of memory per byte of dense YAML, so this bounds a load at
/// tens of MB instead of whatever a path to /dev/zero or a runaway generator provides.
inline constexpr std::size_t kMaxFileBytes = 512 * 1024;

/// Reads `path` and calls Parse. Only a regular file of at most kMaxFileBytes is read (a FIFO is
/// never waited on); one that cannot be read (missing, a directory, a FIFO or device, too
/// large, no permission) is one Error with line 0 that gives the reason. Parse also refuses text
/// that is not UTF-8 or nests more than 64 levels (line and column of the first such place).
LoadResult LoadFile(const std::string& path, const EnvLookup& env);

}  // namespace podnet::config
