#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace podnet::report {

/// What running the exporter costs, from its configuration and the cluster it sees: the bytes
/// each probe kind moves per hour per Pod by path class, the cluster's bytes per month, and the
/// price of the cross-zone ones (the report's "cluster_cost" section). Pure arithmetic: no clock,
/// no I/O, no measurement — the "cost" section beside it is what the run's counters saw.
///
/// Units: bytes are IP packets' bytes (IP header + ICMP/UDP/TCP header + payload, no link-layer
/// framing), both directions together, as podnet_probe_{sent,received}_bytes_total count them
/// and as clouds bill transfer; an hour is 3,600 s; a month is kHoursPerMonth; GB is 10^9 bytes.
/// Price: US dollars per GB crossing a zone boundary, in either direction, both ends' charges
/// together (AWS bills $0.01/GB out of one zone and $0.01/GB into the other: $0.02), as
/// `--price-per-gb` and the recording rule podnet:config:cross_zone_usd_per_gb.
///
/// Every packet is counted as IPv4 with TCP timestamps on (Linux's default); over IPv6 each
/// packet is 20 bytes more. Losses, retransmissions and timeouts are not subtracted or added:
/// a round is counted as every request answered.

/// 30 days, as the report's "cost" section and the Throughput and cost dashboard.
inline constexpr double kHoursPerMonth = 720;

/// The probe kinds' options the arithmetic reads: config::Config's probes as plain numbers
/// (report/ does not depend on config/; app/report_run.cc fills it). An absent kind is off.
struct CostConfig {
  struct Rtt {
    bool udp = false;             // probes.rtt.protocol: udp (else icmp)
    double interval_seconds = 0;  // probes.rtt.interval
    int count = 0;                // echo requests per round
    int size = 0;                 // payload bytes after the ICMP/UDP header
  };
  struct Http {
    double interval_seconds = 0;  // probes.http.interval
    double duration_seconds = 0;  // one mode's timed run
    int qps = 0;                  // requests per second in it
    int connections = 0;          // keep-alive connections opened per round
    bool keepalive = false;       // modes
    bool new_connection = false;
    std::string path;  // the request's target, e.g. /echo
  };
  struct Grpc {
    double interval_seconds = 0;  // probes.grpc.interval
    int count = 0;                // Health/Check calls per round
  };
  struct Dns {
    double interval_seconds = 0;           // probes.dns.interval
    std::vector<std::string> names;        // probes.dns.names
    std::vector<std::string> resolvers;    // "glibc", "musl"
    int sample_pods_per_zone = 0;          // probes.dns.sample.pods_per_zone; 0: every Pod
    int replica_sample_pods_per_zone = 0;  // probes.dns.sample.replica_pods_per_zone; 0: every Pod
  };
  struct Burst {
    double interval_seconds = 0;     // probes.burst.interval
    int stream_counts = 0;           // len(probes.burst.streams): bursts per round
    double max_bytes_per_hour = 0;   // per-Pod budget of payload bytes
    bool coordinated = false;        // peers.kubernetes: coordinated per zone pair
    double period_seconds = 0;       // probes.burst.coordinated.period
    double max_bytes_per_burst = 0;  // probes.burst.coordinated.max_bytes_per_burst
  };
  struct Mtu {
    double interval_seconds = 0;  // probes.mtu.interval
    int max_size = 0;             // probes.mtu.max_size: a healthy path's one size each way
  };
  std::optional<Rtt> rtt;
  std::optional<Mtu> mtu;
  std::optional<Http> http;
  std::optional<Grpc> grpc;
  std::optional<Dns> dns;
  std::optional<Burst> burst;
};

/// What the report knows besides the configuration.
struct CostInputs {
  CostConfig config;
  int pods = 0;        // N: probe Pods in the cluster (discovered, or static peers + this one)
  int zones = 0;       // Z: distinct zones among them
  std::string source;  // where N and Z come from, e.g. "Kubernetes discovery"
  double price_usd_per_gb = 0.02;
  /// Lengths of a peer's node and zone names: the /echo answer carries both (Podnet-Node,
  /// Podnet-Zone). The report passes its own Pod's, since peers' names are like it.
  std::size_t node_name_bytes = 0, zone_name_bytes = 0;
  /// Series one probe Pod exports under this configuration (--config.check's arithmetic); the
  /// section prints it, and its cluster total, when it is set.
  std::optional<std::size_t> series_per_pod;
};

/// Peers this Pod probes, by probe kind name (exporter/probes/registry.cc) then path class.
using PeersByClass = std::map<std::string, std::map<std::string, int>>;

/// DNS questions one lookup sends, by (name, form, resolver), as the report's DNS section
/// measured them where every lookup was answered (deterministic for one resolv.conf); a lookup
/// not in it counts 2 (A and AAAA, no search domain).
using QuestionsPerLookup = std::map<std::vector<std::string>, double>;

/// Bytes one RTT round moves towards one peer: `count` echo requests and their replies, each
/// IPv4 20 + ICMP or UDP 8 + `size` bytes (ping -s: 56 gives 84-byte packets).
double RttRoundBytes(const CostConfig::Rtt& rtt);

/// The HTTP probe's request as http_client.cc writes it: "GET path HTTP/1.1", Host (an IPv4
/// address and port, counted as 16 bytes: "10.0.123.45:9479"), User-Agent
/// "podnet-exporter/<version>", Connection: close in new_connection mode. Bytes.
double HttpRequestBytes(const CostConfig::Http& http, bool close);
/// The /echo answer (responder_loop.cc): status line, Server, Content-Type, Podnet-Node,
/// Podnet-Zone, Content-Length, Connection: close in new_connection mode, and the 75-byte body.
double HttpResponseBytes(bool close, std::size_t node_name_bytes, std::size_t zone_name_bytes);
/// Bytes one HTTP round moves towards one peer: per mode qps × duration requests. Keep-alive:
/// `connections` handshakes (SYN, SYN-ACK: 60-byte IP+TCP headers with options; ACK) and
/// closes (FIN, ACK each way), then per request the request, the answer and one ACK (52-byte
/// IP+TCP headers each). New connection: per request a handshake, the request, the answer, its
/// ACK and the close.
double HttpRoundBytes(const CostConfig::Http& http, std::size_t node_name_bytes,
                      std::size_t zone_name_bytes);

/// Bytes one gRPC round moves towards one peer over its kept HTTP/2 channel: per
/// grpc.health.v1.Health/Check call one segment each way (HTTP/2 frames of RFC 9113, 9-byte
/// headers; HPACK fields indexed after the first call; the 5-byte gRPC message prefix; an empty
/// request, a 2-byte SERVING answer, the trailers), the answer's ACK, and the PING and PING ACK
/// chttp2's bandwidth estimator sends on received data.
double GrpcRoundBytes(const CostConfig::Grpc& grpc);

/// Bytes of a path-MTU round to a healthy path (IPv4; IPv6 adds 40 a datagram): forward one
/// max_size datagram and its 52-byte acknowledgement, reverse one max_size datagram and itself
/// back (no reply is larger than its request). A path with a smaller MTU costs up to 2.4 times
/// that on its first round (lab_mtu: 63.7 kB for 27.1 kB; probes/mtu/search.h), fewer after.
double MtuRoundBytes(const CostConfig::Mtu& mtu);

/// Bytes one DNS round moves: every name × form (as written, absolute) × resolver lookup sends
/// its questions (UDP over IPv4 28 + DNS header 12 + the name + 6) and gets answers 64 bytes
/// longer than the question (an A/AAAA record, or an NXDOMAIN's SOA). The direct questions to
/// each nameserver (podnet_dns_server_rtt_seconds) are not counted: one each per round.
double DnsRoundBytes(const CostConfig::Dns& dns, const QuestionsPerLookup& questions);
/// Questions one DNS round of one Pod sends through its resolv.conf nameserver: the sum over
/// name × form × resolver of `questions` (2 where it has no figure). Questions.
double DnsRoundQuestions(const CostConfig::Dns& dns, const QuestionsPerLookup& questions);

/// Bytes on the wire per payload byte of a burst: IP and TCP headers ~3.6 % at a 1448-byte MSS,
/// the receiver's ACKs ~1.8 %, the control connection a few kB (docs/probes.md, "Throughput
/// bursts").
inline constexpr double kBurstWireFactor = 1.06;

/// One line of the section: a probe kind (or "all") towards one path class.
struct CostLine {
  std::string probe;  // a probe kind's name (exporter/probes/registry.cc), or "all"
  std::string path_class;
  std::optional<int> peers;  // this Pod's peers of the kind in the class (not for bursts' pairs)
  double pod_bytes_per_hour = 0;       // one Pod; coordinated bursts: the cluster's / N
  double cluster_bytes_per_month = 0;  // every Pod, kHoursPerMonth
  double cluster_usd_per_month = 0;    // cross_zone only
};

struct ClusterCost {
  std::vector<CostLine> lines;  // by probe kind, then "all" by class
  double cross_zone_bytes_per_month = 0;
  double cross_zone_usd_per_month = 0;
  std::vector<std::string> arithmetic;  // how each kind's bytes were computed, with numbers
};

/// The cluster's cost: per Pod, a kind's bytes per hour towards a class = its peers there ×
/// bytes per round × 3600 / interval, and the cluster's = N × that × kHoursPerMonth. Bursts
/// coordinated per zone pair instead: per month, each of the Z × (Z − 1) ordered cross-zone
/// pairs (Z same-zone ones) gets len(streams) bursts per period of at most max_bytes_per_burst
/// payload × kBurstWireFactor, whatever N (a bound); uncoordinated: at most max_bytes_per_hour ×
/// kBurstWireFactor per Pod, shared by the classes as the burst peers are. DNS goes to the
/// resolv.conf nameserver, whose zone is not known: path class "unknown", never priced; its
/// lookups run on every Pod, or with probes.dns.sample on min(N, max(Z, 1) × pods_per_zone)
/// Pods (a bound: a zone smaller than pods_per_zone gives fewer), the line's per-Pod figure
/// then the cluster's / N.
ClusterCost ComputeClusterCost(const CostInputs& in, const PeersByClass& peers,
                               const QuestionsPerLookup& questions);

}  // namespace podnet::report
