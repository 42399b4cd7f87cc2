#pragma once

// The options of every probe kind and of the burst responder: the part of the configuration's
// schema each kind reads (config.h holds them; probes/<kind>/ holds the behaviour). They keep
// their kind's namespace. The defaults below are the documented ones (docs/configuration.md).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/config/units.h"
#include "exporter/net/address.h"

namespace podnet::probes::rtt {

enum class RttProtocol { kIcmp, kUdp };
const char* RttProtocolName(RttProtocol p);  // "icmp" | "udp"

/// probes.rtt: a train of `count` echo requests `spacing` apart, every `interval`; a request
/// unanswered `timeout` after the train's last send is lost (the deadline is rounded up to the
/// scheduler's 20 ms grid, so it may be up to 20 ms later). A train whose every request has been
/// answered ends at its last reply.
struct RttOptions {
  RttProtocol protocol = RttProtocol::kIcmp;
  config::Duration interval = std::chrono::seconds(10);
  int count = 20;
  config::Duration spacing = std::chrono::milliseconds(50);
  config::Duration timeout = std::chrono::seconds(1);
  /// Payload bytes after the ICMP/UDP header (our 16-byte probe header included), as ping -s.
  int size = 56;

  bool operator==(const RttOptions&) const = default;
};

}  // namespace podnet::probes::rtt

namespace podnet::probes::dns {

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
  int pods_per_zone = 2;                            // run the lookups
  config::Duration period = std::chrono::hours(1);  // at least the interval (1h or it, default)
  int replica_pods_per_zone = 6;                    // ask each replica directly

  bool operator==(const DnsSampleOptions&) const = default;
};

/// probes.dns: every `interval`, each name is looked up as written and in its absolute form
/// (a trailing dot), once per resolver model, under the resolv.conf at `resolv_conf` (re-read
/// every round, as the libcs notice a changed file); and each nameserver of that file, and each
/// discovered cluster DNS endpoint (`cluster_dns`, with peers.kubernetes), is asked directly for
/// the first name's absolute form (podnet_dns_server_rtt_seconds).
struct DnsOptions {
  config::Duration interval = std::chrono::seconds(30);
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

}  // namespace podnet::probes::dns

namespace podnet::probes::http {

/// probes.http: every `interval`, towards each peer, one timed run per mode of `duration` at
/// `qps` requests per second spread over `connections` TCP connections, against the peer's
/// HTTP responder (`GET path`, default /echo). The modes run one after the other, keep-alive
/// first. A request not answered `timeout` after its intended start is a timeout.
struct HttpOptions {
  config::Duration interval = std::chrono::seconds(30);
  config::Duration duration = std::chrono::seconds(2);
  int qps = 100;
  int connections = 4;
  bool keepalive = true;       // modes: keepalive — connections opened before the timed run
  bool new_connection = true;  // modes: new_connection — connect + request + close per request
  config::Duration timeout = std::chrono::seconds(1);
  std::string path = "/echo";
  std::uint64_t max_body_bytes = 65536;  // a longer response body is body_too_large

  bool operator==(const HttpOptions&) const = default;
};

}  // namespace podnet::probes::http

namespace podnet::probes::grpc {

/// probes.grpc: every `interval`, `count` grpc.health.v1.Health/Check calls `spacing` apart to
/// each peer's gRPC health responder on `port` (the same on every peer, as a DaemonSet's), over
/// one HTTP/2 channel per peer kept between rounds. A call unanswered after `timeout` fails.
struct GrpcOptions {
  config::Duration interval = std::chrono::seconds(10);
  int count = 10;
  config::Duration spacing = std::chrono::milliseconds(100);
  config::Duration timeout = std::chrono::seconds(1);
  std::uint16_t port = 9480;

  bool operator==(const GrpcOptions&) const = default;
};

}  // namespace podnet::probes::grpc

namespace podnet::probes::service {

enum class ServiceProtocol { kUdp, kHttp };
const char* ServiceProtocolName(ServiceProtocol p);  // "udp" | "http"

/// One entry of probes.service.targets: a Service address whose backends are podnet responders.
struct ServiceTarget {
  std::string name;     // the `service` label value; unique in the list
  std::string address;  // an IP literal (a ClusterIP) or a DNS name, resolved every round
  std::uint16_t port = 9479;
  ServiceProtocol protocol = ServiceProtocol::kUdp;  // udp: UDP echo; http: GET /echo
  /// The Kubernetes Service behind `address` (key kubernetes_service: "NAMESPACE/NAME"; derived
  /// from an address NAME.NAMESPACE.svc[.DOMAIN] when absent; both "" when unknown). With
  /// peers.kubernetes the exporter reads what it asks of the dataplane (podnet_service_info).
  std::string kubernetes_namespace;
  std::string kubernetes_name;

  bool operator==(const ServiceTarget&) const = default;
};

/// probes.service: every `interval`, each target gets `count` requests `spacing` apart, each a
/// flow of its own (UDP: a new socket, so a new source port; HTTP: a new connection), so that a
/// Service's load balancing (kube-proxy's DNAT, conntrack) picks a backend for every request. A
/// request unanswered `timeout` after it was sent fails with reason "timeout"; resolving a DNS
/// name may take up to `timeout` before the first request.
struct ServiceOptions {
  config::Duration interval = std::chrono::seconds(10);
  int count = 30;
  config::Duration spacing = std::chrono::milliseconds(20);
  config::Duration timeout = std::chrono::seconds(1);
  std::vector<ServiceTarget> targets;

  bool operator==(const ServiceOptions&) const = default;
};

}  // namespace podnet::probes::service

namespace podnet::probes::mtu {

/// probes.mtu: every `interval`, towards each peer's UDP echo responder, a path-MTU search in
/// each direction (probes/mtu/mtu_probe.h) between `min_size` and the smaller of `max_size` and
/// this Pod's interface MTU, in IP packet bytes (IP and UDP headers included), with at most
/// `max_datagrams` datagrams a direction; a datagram unanswered after `timeout` is lost (sent
/// once more before it counts).
struct MtuOptions {
  config::Duration interval = std::chrono::minutes(10);
  config::Duration timeout = std::chrono::milliseconds(500);
  int min_size = 1280;  // the smallest MTU IPv6 allows (RFC 8200)
  int max_size = 9001;  // jumbo frames as AWS, GCP and Azure offer them (9001, 8896, ...)
  int max_datagrams = 24;

  bool operator==(const MtuOptions&) const = default;
};

}  // namespace podnet::probes::mtu

namespace podnet::probes::burst {

/// probes.burst: every `interval`, each peer gets one TCP burst of `duration` per entry of
/// `streams` (parallel connections), against its iperf3-compatible responder (burst_port).
/// Bursts of one exporter never overlap; `max_bytes_per_hour` caps the bytes they send in any
/// sliding hour (a burst that does not fit is skipped and counted; a running burst stops
/// sending when it reaches what is left).
struct BurstOptions {
  config::Duration interval = std::chrono::minutes(15);
  config::Duration duration = std::chrono::seconds(2);
  std::vector<int> streams = {1, 8};
  std::uint64_t max_bytes_per_hour = 20'000'000'000ULL;  // 20 GB
  /// Deadline of each step before and after the data phase (connect, each control message).
  config::Duration step_timeout = std::chrono::seconds(5);

  /// probes.burst.coordinated: how bursts run with peers.kubernetes (ignored without it). Each
  /// `period` (numbered floor(unix time / period)), every ordered zone pair (A → B, same-zone
  /// pairs included) gets one round of bursts from one prober in A to one peer in B, both
  /// chosen by rendezvous hashing over the discovered Pod list (topology::ChooseBurstPair);
  /// every other Pod skips the pair. `interval` is then how often a Pod checks whether it is a
  /// pair's prober (the prober bursts at its first check in a period). Each burst sends at
  /// most `max_bytes_per_burst` payload bytes, so the cluster's burst bytes per period are at
  /// most zones² × len(streams) × max_bytes_per_burst, whatever the node count and link speed.
  struct Coordinated {
    config::Duration period = std::chrono::hours(6);
    std::uint64_t max_bytes_per_burst = 500'000'000ULL;  // 500 MB

    bool operator==(const Coordinated&) const = default;
  };
  Coordinated coordinated;

  bool operator==(const BurstOptions&) const = default;
};

/// responders.burst: the iperf3-compatible server peers' burst probes (and stock `iperf3 -c`)
/// aim at. Present = on.
struct BurstResponderOptions {
  net::HostPort listen_address{boost::asio::ip::address_v4::any(), 5201};
  std::chrono::seconds max_duration{10};  // a test asking for longer (time + omit) is refused
  int max_clients = 2;                    // concurrent tests; more get ACCESS_DENIED
  int max_streams = 16;                   // parallel streams per test
  // `clients`: false ("probe_pods", the default) admits only the addresses of the probe Pods
  // discovery lists and of the static peers; true ("any") every source, e.g. `iperf3 -c`.
  bool any_client = false;

  bool operator==(const BurstResponderOptions& o) const {
    return listen_address.address == o.listen_address.address &&
           listen_address.port == o.listen_address.port && max_duration == o.max_duration &&
           max_clients == o.max_clients && max_streams == o.max_streams &&
           any_client == o.any_client;
  }
};

}  // namespace podnet::probes::burst
