#include "exporter/report/cost.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <utility>

#include "podnet/version.h"

namespace podnet::report {
namespace {

// Header bytes of one packet (IPv4, RFC 791; ICMP echo, RFC 792; UDP, RFC 768; TCP, RFC 9293).
constexpr double kIpv4 = 20;
constexpr double kIcmpOrUdp = 8;
// TCP with the timestamp option (10 bytes, padded to 12) Linux sends on every segment.
constexpr double kTcp = 32;
// SYN and SYN-ACK: MSS 4, SACK permitted 2, timestamps 10, window scale 3, NOP 1 (20 + 20).
constexpr double kTcpSyn = 40;
constexpr double kSegment = kIpv4 + kTcp;
constexpr double kSynSegment = kIpv4 + kTcpSyn;
// Opening (SYN, SYN-ACK, ACK) and closing (FIN and its ACK, each way) one TCP connection.
constexpr double kHandshake = 2 * kSynSegment + kSegment;
constexpr double kClose = 4 * kSegment;

constexpr double Len(std::string_view s) { return static_cast<double>(s.size()); }

// HTTP/1.1 (RFC 9112) as Beast writes http_client.cc's request and the responder's answer.
constexpr double kCrlf = 2;
constexpr double kHostValue = 16;  // "10.0.123.45:9479": an IPv4 Pod address and the port
// "podnet-exporter/<version>", as http_client.cc sends it.
constexpr double kUserAgentValue = Len("podnet-exporter/") + Len(kVersion);
constexpr std::string_view kConnectionClose = "Connection: close\r\n";
constexpr double kEchoBody = 75;  // responder_loop.cc, kEchoBody

// HTTP/2 (RFC 9113) frames of one Health/Check call on a channel whose HPACK (RFC 7541) tables
// hold every field after the first call: request HEADERS (9 + 7 indexed fields of 1 byte +
// grpc-timeout as a literal of ~7) and DATA (9 + the 5-byte gRPC prefix + an empty
// HealthCheckRequest); answer HEADERS (9 + 3 indexed), DATA (9 + 5 + status SERVING: 2) and the
// trailers' HEADERS (9 + grpc-status indexed: 1).
constexpr double kGrpcRequestFrames = (9 + 7 + 7) + (9 + 5);
constexpr double kGrpcAnswerFrames = (9 + 3) + (9 + 5 + 2) + (9 + 1);
constexpr double kHttp2Ping = 9 + 8;

// DNS (RFC 1035): UDP over IPv4, the 12-byte header, the name in labels (its length + 2), QTYPE
// and QCLASS; an answer repeats the question and adds a record (A 16, AAAA 28 with a
// compressed name) or an NXDOMAIN's SOA in the authority section (~50-70): 64 counted.
constexpr double kDnsAnswerExtra = 64;

double PerHour(double bytes_per_round, double interval_seconds) {
  return interval_seconds > 0 ? bytes_per_round * 3600 / interval_seconds : 0;
}

std::string Num(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

double RttRoundBytes(const CostConfig::Rtt& rtt) {
  return rtt.count * 2 * (kIpv4 + kIcmpOrUdp + rtt.size);
}

double HttpRequestBytes(const CostConfig::Http& http, bool close) {
  return Len("GET ") + Len(http.path) + Len(" HTTP/1.1\r\n") + Len("Host: ") + kHostValue + kCrlf +
         Len("User-Agent: ") + kUserAgentValue + kCrlf + (close ? Len(kConnectionClose) : 0) +
         kCrlf;
}

double HttpResponseBytes(bool close, std::size_t node_name_bytes, std::size_t zone_name_bytes) {
  return Len("HTTP/1.1 200 OK\r\n") + Len("Server: podnet-exporter\r\n") +
         Len("Content-Type: text/plain; charset=utf-8\r\n") + Len("Podnet-Node: ") +
         static_cast<double>(node_name_bytes) + kCrlf + Len("Podnet-Zone: ") +
         static_cast<double>(zone_name_bytes) + kCrlf + Len("Content-Length: 75\r\n") +
         (close ? Len(kConnectionClose) : 0) + kCrlf + kEchoBody;
}

double HttpRoundBytes(const CostConfig::Http& http, std::size_t node_name_bytes,
                      std::size_t zone_name_bytes) {
  // http_probe.cc: max(1, duration × qps) requests per mode.
  double requests =
      std::max(1.0, static_cast<double>(static_cast<long long>(http.duration_seconds * http.qps)));
  double bytes = 0;
  if (http.keepalive) {
    double exchange = kSegment + HttpRequestBytes(http, false) + kSegment +
                      HttpResponseBytes(false, node_name_bytes, zone_name_bytes) + kSegment;
    bytes += http.connections * (kHandshake + kClose) + requests * exchange;
  }
  if (http.new_connection) {
    double exchange = kHandshake + kSegment + HttpRequestBytes(http, true) + kSegment +
                      HttpResponseBytes(true, node_name_bytes, zone_name_bytes) + kSegment + kClose;
    bytes += requests * exchange;
  }
  return bytes;
}

double GrpcRoundBytes(const CostConfig::Grpc& grpc) {
  double call = (kSegment + kGrpcRequestFrames) + (kSegment + kGrpcAnswerFrames) + kSegment +
                2 * (kSegment + kHttp2Ping);
  return grpc.count * call;
}

double MtuRoundBytes(const CostConfig::Mtu& mtu) {
  double header = kIpv4 + kIcmpOrUdp;
  // Forward: the full-size request and its 24-byte acknowledgement; reverse: the full-size
  // request and itself back.
  return mtu.max_size + (header + 24) + 2 * mtu.max_size;
}

namespace {

// Each name × form × resolver lookup of one DNS round: fn(name, questions it sends).
template <typename Fn>
void EachLookup(const CostConfig::Dns& dns, const QuestionsPerLookup& questions, Fn fn) {
  for (const auto& name : dns.names) {
    for (const char* form : {"as_written", "absolute"}) {
      for (const auto& resolver : dns.resolvers) {
        auto it = questions.find({name, form, resolver});
        fn(name, it != questions.end() ? it->second : 2);
      }
    }
  }
}

}  // namespace

double DnsRoundBytes(const CostConfig::Dns& dns, const QuestionsPerLookup& questions) {
  double bytes = 0;
  EachLookup(dns, questions, [&](const std::string& name, double n) {
    double question = kIpv4 + kIcmpOrUdp + 12 + Len(name) + 2 + 4;
    bytes += n * (2 * question + kDnsAnswerExtra);
  });
  return bytes;
}

double DnsRoundQuestions(const CostConfig::Dns& dns, const QuestionsPerLookup& questions) {
  double total = 0;
  EachLookup(dns, questions, [&](const std::string&, double n) { total += n; });
  return total;
}

namespace {

// One ComputeClusterCost's state: the cluster (N Pods, Z zones), the lines and the arithmetic
// so far. Each kind adds its lines; Finish() adds the totals by class.
class CostSheet {
 public:
  CostSheet(const CostInputs& in, const PeersByClass& peers)
      : in_(in), peers_(peers), n_(std::max(0, in.pods)), z_(std::max(0, in.zones)) {}

  // A kind that probes every selected peer at its interval: per peer the same round of
  // `round_bytes`; `how` is the round's arithmetic.
  void PerPeer(const std::string& kind, double round_bytes, double interval,
               const std::string& how) {
    double per_peer_hour = PerHour(round_bytes, interval);
    auto it = peers_.find(kind);
    if (it == peers_.end()) return;
    for (const auto& [path, count] : it->second) {
      double pod = count * per_peer_hour;
      Add(kind, path, count, pod, n_ * pod * kHoursPerMonth);
    }
    out_.arithmetic.push_back(kind + ": " + how + " = " + Num("%.0f", round_bytes) +
                              " bytes a round per peer, every " + Num("%g", interval) +
                              " s: " + Num("%.3f", per_peer_hour / 1e6) + " MB an hour per peer");
  }

  // DNS: one line (its class unknown), run by every Pod or by the sample's.
  void Dns(const CostConfig::Dns& d, const QuestionsPerLookup& questions) {
    double round = DnsRoundBytes(d, questions);
    double sampled = Drawn(d.sample_pods_per_zone);
    double month = sampled * PerHour(round, d.interval_seconds) * kHoursPerMonth;
    Add("dns", "unknown", std::nullopt, n_ > 0 ? month / kHoursPerMonth / n_ : 0, month);
    double qps =
        d.interval_seconds > 0 ? sampled * DnsRoundQuestions(d, questions) / d.interval_seconds : 0;
    std::string who = d.sample_pods_per_zone > 0
                          ? Num("%.0f", sampled) + " of " + Num("%.0f", n_) +
                                " Pods (probes.dns.sample: " + Num("%.0f", d.sample_pods_per_zone) +
                                " a zone)"
                          : "every Pod (" + Num("%.0f", n_) + ")";
    out_.arithmetic.push_back(
        "dns: " + Num("%.0f", static_cast<double>(d.names.size())) + " names × 2 forms × " +
        Num("%.0f", static_cast<double>(d.resolvers.size())) +
        " resolvers, questions per lookup as the DNS table measured them (2 where a lookup "
        "failed) = " +
        Num("%.0f", round) + " bytes a round, every " + Num("%g", d.interval_seconds) +
        " s, to the resolv.conf nameserver (a Service: its replica's zone, so the class, is not "
        "known), run by " +
        who + ": " + Num("%.1f", qps) +
        " questions/s at the cluster DNS, besides one a round from every Pod to each "
        "resolv.conf nameserver and from " +
        (d.replica_sample_pods_per_zone > 0
             ? Num("%.0f", Drawn(d.replica_sample_pods_per_zone)) + " Pods (" +
                   Num("%.0f", d.replica_sample_pods_per_zone) + " a zone)"
             : std::string("every Pod")) +
        " to each cluster DNS replica");
  }

  // Coordinated bursts: one prober per ordered zone pair a period, whatever N.
  void CoordinatedBursts(const CostConfig::Burst& b) {
    double periods = b.period_seconds > 0 ? kHoursPerMonth * 3600 / b.period_seconds : 0;
    double burst = b.max_bytes_per_burst * kBurstWireFactor;
    for (auto [path, pairs] : {std::pair<const char*, double>{"same_zone", z_},
                               std::pair<const char*, double>{"cross_zone", z_ * (z_ - 1)}}) {
      double month = pairs * b.stream_counts * periods * burst;
      Add("burst", path, std::nullopt, n_ > 0 ? month / kHoursPerMonth / n_ : 0, month);
    }
    out_.arithmetic.push_back(
        "burst (coordinated, a bound for any N and link speed): " + Num("%.0f", z_ * (z_ - 1)) +
        " ordered cross-zone pairs (" + Num("%.0f", z_) + " same-zone) × " +
        Num("%.0f", b.stream_counts) + " stream counts × " + Num("%.1f", periods) +
        " periods a month × " + Num("%.0f", b.max_bytes_per_burst / 1e6) + " MB × " +
        Num("%.2f", kBurstWireFactor) + " on the wire; per Pod: the cluster's / N");
  }

  // Bursts per peer: each Pod's max_bytes_per_hour, shared by the classes as the peers are.
  void PerPeerBursts(const CostConfig::Burst& b) {
    auto it = peers_.find("burst");
    double total = 0;
    if (it != peers_.end()) {
      for (const auto& [path, count] : it->second) total += count;
    }
    double pod = b.max_bytes_per_hour * kBurstWireFactor;
    if (it != peers_.end() && total > 0) {
      for (const auto& [path, count] : it->second) {
        double share = pod * count / total;
        Add("burst", path, count, share, n_ * share * kHoursPerMonth);
      }
    }
    out_.arithmetic.push_back("burst (per peer, a bound): max_bytes_per_hour " +
                              Num("%.0f", b.max_bytes_per_hour / 1e6) + " MB × " +
                              Num("%.2f", kBurstWireFactor) +
                              " on the wire per Pod, shared by the classes as the peers are");
  }

  // The kinds' lines, then their totals by class (probe "all") and the cross-zone figures.
  ClusterCost Finish() {
    std::map<std::string, CostLine> all;
    for (const auto& l : out_.lines) {
      auto& t = all[l.path_class];
      t.probe = "all";
      t.path_class = l.path_class;
      t.pod_bytes_per_hour += l.pod_bytes_per_hour;
      t.cluster_bytes_per_month += l.cluster_bytes_per_month;
      t.cluster_usd_per_month += l.cluster_usd_per_month;
    }
    for (auto& [path, t] : all) out_.lines.push_back(t);
    if (auto it = all.find("cross_zone"); it != all.end()) {
      out_.cross_zone_bytes_per_month = it->second.cluster_bytes_per_month;
      out_.cross_zone_usd_per_month = it->second.cluster_usd_per_month;
    }
    return std::move(out_);
  }

 private:
  void Add(const std::string& kind, const std::string& path, std::optional<int> count,
           double pod_per_hour, double cluster_per_month) {
    double usd = path == "cross_zone" ? cluster_per_month / 1e9 * in_.price_usd_per_gb : 0;
    out_.lines.push_back({kind, path, count, pod_per_hour, cluster_per_month, usd});
  }
  // The Pods a per-zone draw of `per_zone` holds (probes.dns.sample); 0: every Pod.
  double Drawn(int per_zone) const {
    return per_zone > 0 ? std::min(n_, std::max(z_, 1.0) * per_zone) : n_;
  }

  const CostInputs& in_;
  const PeersByClass& peers_;
  const double n_, z_;
  ClusterCost out_;
};

}  // namespace

ClusterCost ComputeClusterCost(const CostInputs& in, const PeersByClass& peers,
                               const QuestionsPerLookup& questions) {
  const CostConfig& c = in.config;
  CostSheet sheet(in, peers);
  if (c.rtt) {
    sheet.PerPeer("rtt", RttRoundBytes(*c.rtt), c.rtt->interval_seconds,
                  Num("%.0f", c.rtt->count) + " × 2 × (20 + 8 + " + Num("%.0f", c.rtt->size) + ")");
  }
  if (c.http) {
    const auto& h = *c.http;
    sheet.PerPeer(
        "http", HttpRoundBytes(h, in.node_name_bytes, in.zone_name_bytes), h.interval_seconds,
        Num("%g", h.qps) + " qps × " + Num("%g", h.duration_seconds) + " s per mode, " +
            "requests of " + Num("%.0f", HttpRequestBytes(h, false)) + " / answers of " +
            Num("%.0f", HttpResponseBytes(false, in.node_name_bytes, in.zone_name_bytes)) +
            " bytes (keep-alive) plus TCP headers, handshakes and closes");
  }
  if (c.grpc) {
    sheet.PerPeer(
        "grpc", GrpcRoundBytes(*c.grpc), c.grpc->interval_seconds,
        Num("%.0f", c.grpc->count) + " calls × " + Num("%.0f", GrpcRoundBytes({0, 1})) + " bytes");
  }
  if (c.mtu) {
    sheet.PerPeer("mtu", MtuRoundBytes(*c.mtu), c.mtu->interval_seconds,
                  "a healthy path: " + Num("%.0f", c.mtu->max_size) +
                      " B forward with a 52 B acknowledgement, then " +
                      Num("%.0f", c.mtu->max_size) +
                      " B there and back (a bound: the interface MTU when smaller)");
  }
  if (c.dns) sheet.Dns(*c.dns, questions);
  if (c.burst) {
    if (c.burst->coordinated) {
      sheet.CoordinatedBursts(*c.burst);
    } else {
      sheet.PerPeerBursts(*c.burst);
    }
  }
  return sheet.Finish();
}

}  // namespace podnet::report
