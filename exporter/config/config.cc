#include "exporter/config/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "exporter/config/decoder.h"
#include "exporter/config/read_file.h"
#include "exporter/config/text_checks.h"

namespace podnet::config {

using probes::burst::BurstOptions;
using probes::burst::BurstResponderOptions;
using probes::grpc::GrpcOptions;
using probes::http::HttpOptions;
using probes::rtt::RttOptions;
using probes::rtt::RttProtocol;

std::string Error::ToString() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": ";
  if (!key_path.empty()) out += key_path + ": ";
  out += message;
  return out;
}

namespace {

void DecodeSelf(Decoder& d, const YAML::Node& root, const YAML::Node& n, Config& c) {
  if (!n.IsDefined() || n.IsNull()) {
    d.Fail(root, "self", "required (self.name and self.node say who this probe Pod is)");
    return;
  }
  if (!d.CheckMap(n, "self", {"name", "node", "zone"})) return;
  struct Field {
    const char* key;
    std::string* out;
    bool required;
  };
  for (const Field& f : {Field{"name", &c.self.name, true}, Field{"node", &c.self.node, true},
                         Field{"zone", &c.self.zone, false}}) {
    std::string path = std::string("self.") + f.key;
    const YAML::Node v = n[f.key];
    bool bad = false;  // String said why: no second problem for the same value
    if (v.IsDefined() && !v.IsNull()) {
      if (auto s = d.String(v, path)) {
        *f.out = *s;
      } else {
        bad = true;
      }
    }
    if (f.required && f.out->empty() && !bad) {
      d.Fail(v.IsDefined() ? v : n, path, "required and must not be empty");
    }
  }
}

void DecodeBurstResponder(Decoder& d, const YAML::Node& n, Config& c) {
  const std::string base = "responders.burst";
  if (!d.CheckMap(n, base,
                  {"listen_address", "max_duration", "max_clients", "max_streams", "clients"})) {
    return;
  }
  BurstResponderOptions o;
  if (const YAML::Node la = n["listen_address"]; la.IsDefined()) {
    if (auto hp = d.ListenAddress(la, base + ".listen_address")) o.listen_address = *hp;
  }
  if (const YAML::Node v = n["max_duration"]; v.IsDefined()) {
    if (auto dur = d.PositiveDuration(v, base + ".max_duration")) {
      if (*dur < std::chrono::seconds(1) || *dur % std::chrono::seconds(1) != Duration::zero()) {
        d.Fail(v, base + ".max_duration", "must be whole seconds (iperf3 counts seconds)");
      } else {
        o.max_duration = std::chrono::duration_cast<std::chrono::seconds>(*dur);
      }
    }
  }
  if (const YAML::Node v = n["max_clients"]; v.IsDefined()) {
    if (auto i = d.Integer(v, base + ".max_clients", 1, 64)) o.max_clients = static_cast<int>(*i);
  }
  if (const YAML::Node v = n["max_streams"]; v.IsDefined()) {
    if (auto i = d.Integer(v, base + ".max_streams", 1, 128)) o.max_streams = static_cast<int>(*i);
  }
  if (const YAML::Node v = n["clients"]; v.IsDefined()) {
    if (auto s = d.String(v, base + ".clients")) {
      if (*s == "any") {
        o.any_client = true;
      } else if (*s != "probe_pods") {
        d.Fail(v, base + ".clients", "must be \"probe_pods\" or \"any\", got " + Quote(*s));
      }
    }
  }
  c.burst_responder = o;
}

// Without gRPC in the build, a configuration that asks for it must fail, not be ignored.
bool GrpcBuilt(Decoder& d, const YAML::Node& n, const std::string& path) {
#ifdef PODNET_WITH_GRPC
  return true;
#else
  d.Fail(n, path, "not supported by this build (built with -DPODNET_WITH_GRPC=OFF)");
  return false;
#endif
}

void DecodeGrpcResponder(Decoder& d, const YAML::Node& n, Config& c) {
  const std::string base = "responders.grpc";
  if (!n.IsDefined() || !GrpcBuilt(d, n, base) || !d.CheckMap(n, base, {"listen_address"})) {
    return;
  }
  c.grpc_listen_address = net::HostPort{boost::asio::ip::address_v4::any(), 9480};
  if (const YAML::Node la = n["listen_address"]; la.IsDefined()) {
    if (auto hp = d.ListenAddress(la, base + ".listen_address")) c.grpc_listen_address = *hp;
  }
}

void DecodeResponders(Decoder& d, const YAML::Node& n, Config& c) {
  if (!n.IsDefined() || !d.CheckMap(n, "responders", {"udp_echo", "burst", "grpc"})) return;
  DecodeGrpcResponder(d, n["grpc"], c);
  if (const YAML::Node b = n["burst"]; b.IsDefined()) DecodeBurstResponder(d, b, c);
  const YAML::Node echo = n["udp_echo"];
  if (!echo.IsDefined() || !d.CheckMap(echo, "responders.udp_echo", {"listen_address"})) return;
  if (const YAML::Node la = echo["listen_address"]; la.IsDefined()) {
    if (auto hp = d.ListenAddress(la, "responders.udp_echo.listen_address")) {
      c.udp_echo_listen_address = *hp;
    }
  }
}

// `port` and `burst_port` of a peer entry (static or kubernetes); false if either is invalid.
bool DecodePeerPorts(Decoder& d, const YAML::Node& n, const std::string& path, std::uint16_t* port,
                     std::uint16_t* burst_port) {
  bool ok = true;
  for (auto [key, out] : {std::pair<const char*, std::uint16_t*>{"port", port},
                          std::pair<const char*, std::uint16_t*>{"burst_port", burst_port}}) {
    if (const YAML::Node v = n[key]; v.IsDefined()) {
      if (auto p = d.Integer(v, path + "." + key, 1, 65535)) {
        *out = static_cast<std::uint16_t>(*p);
      } else {
        ok = false;
      }
    }
  }
  return ok;
}

// Keys of the mapping `n` (at `base`) that must be present, non-empty strings; each one found is
// stored in its field. False when any is missing, empty or not a string (each one reported).
bool RequiredStrings(Decoder& d, const YAML::Node& n, const std::string& base,
                     std::initializer_list<std::pair<const char*, std::string*>> fields) {
  bool ok = true;
  for (auto [key, out] : fields) {
    const std::string path = base + "." + key;
    const YAML::Node v = n[key];
    if (!v.IsDefined() || v.IsNull()) {
      d.Fail(n, path, "required");
      ok = false;
    } else if (auto s = d.String(v, path); !s) {
      ok = false;
    } else if (s->empty()) {
      d.Fail(v, path, "must not be empty");
      ok = false;
    } else {
      *out = *s;
    }
  }
  return ok;
}

bool ValidDnsName(const std::string& name);  // below, with probes.dns.names

void DecodeKubernetesPeers(Decoder& d, const YAML::Node& n, Config& c) {
  const std::string base = "peers.kubernetes";
  if (!d.CheckMap(n, base,
                  {"namespace", "service", "peers_per_zone", "port", "burst_port", "discovery",
                   "dns_name", "dns_refresh"})) {
    return;
  }
  KubernetesPeers k;
  bool ok =
      RequiredStrings(d, n, base, {{"namespace", &k.namespace_name}, {"service", &k.service}});
  if (const YAML::Node v = n["peers_per_zone"]; v.IsDefined()) {
    if (auto i = d.Integer(v, base + ".peers_per_zone", 1, 1000)) {
      k.peers_per_zone = static_cast<int>(*i);
    } else {
      ok = false;
    }
  }
  ok = DecodePeerPorts(d, n, base, &k.port, &k.burst_port) && ok;
  if (const YAML::Node v = n["discovery"]; v.IsDefined()) {
    if (auto s = d.String(v, base + ".discovery"); s && (*s == "watch" || *s == "dns")) {
      k.discovery =
          *s == "dns" ? KubernetesPeers::Discovery::kDns : KubernetesPeers::Discovery::kWatch;
    } else {
      if (s) d.Fail(v, base + ".discovery", "must be watch or dns, got \"" + *s + "\"");
      ok = false;
    }
  }
  if (const YAML::Node v = n["dns_name"]; v.IsDefined()) {
    auto s = d.String(v, base + ".dns_name");
    if (s && !s->empty() && !ValidDnsName(*s)) {
      d.Fail(v, base + ".dns_name", "not a valid DNS name: " + Quote(*s));
      ok = false;
    } else if (s) {
      k.dns_name = *s;
    } else {
      ok = false;
    }
  }
  if (const YAML::Node v = n["dns_refresh"]; v.IsDefined()) {
    auto dur = d.PositiveDuration(v, base + ".dns_refresh");
    if (dur && (*dur < std::chrono::seconds(1) || *dur > std::chrono::hours(1))) {
      d.Fail(v, base + ".dns_refresh", "must be from 1s to 1h");
      ok = false;
    } else if (dur) {
      k.dns_refresh = *dur;
    } else {
      ok = false;
    }
  }
  if (ok) c.kubernetes = k;
}

// metrics.families: { NAME: true|false } over the defaults (metric_families.h).
void DecodeMetricFamilies(Decoder& d, const YAML::Node& n, Config& c) {
  if (n.IsNull()) return;
  if (!n.IsMap()) {
    d.Fail(n, "metrics.families", "must be a mapping of metric family names to true or false");
    return;
  }
  std::set<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    const YAML::Node key = it->first;  // a copy: it->first is a temporary of yaml-cpp
    const YAML::Node value = it->second;
    if (!key.IsScalar()) {
      d.Fail(key, "metrics.families", "keys must be metric family names");
      continue;
    }
    const std::string& name = key.Scalar();
    std::string path = "metrics.families." + name;
    if (!seen.insert(name).second) {
      d.Fail(key, path, "duplicate key");
      continue;
    }
    auto families = MetricFamilies();
    if (std::none_of(families.begin(), families.end(),
                     [&](const MetricFamilyEntry& f) { return f.name == name; })) {
      d.Fail(key, path,
             "unknown metric family: the names that switch are the probe kinds' families "
             "(podnet_rtt_*, _http_*, _grpc_*, _dns_*, _burst_*, _service_*, _path_mtu_*; not "
             "podnet_probe_* "
             "or podnet_peers), without _bucket, _sum or _count (docs/metrics.md)");
      continue;
    }
    if (auto on = d.Bool(value, path)) {
      if (*on) {
        c.families_off.erase(name);
      } else {
        c.families_off.insert(name);
      }
    }
  }
}

void DecodeMetrics(Decoder& d, const YAML::Node& n, Config& c) {
  if (!n.IsDefined() || n.IsNull() ||
      !d.CheckMap(n, "metrics",
                  {"aggregate_peers", "per_peer_histograms", "native_histograms", "families"})) {
    return;
  }
  if (const YAML::Node v = n["aggregate_peers"]; v.IsDefined()) {
    if (auto b = d.Bool(v, "metrics.aggregate_peers")) c.aggregate_peers = *b;
  }
  if (const YAML::Node v = n["per_peer_histograms"]; v.IsDefined()) {
    if (auto b = d.Bool(v, "metrics.per_peer_histograms")) c.per_peer_histograms = *b;
    if (c.per_peer_histograms && c.aggregate_peers) {
      d.Fail(v, "metrics.per_peer_histograms",
             "cannot be true with aggregate_peers: true, which drops the peer labels from every "
             "series");
    }
  }
  if (const YAML::Node v = n["native_histograms"]; v.IsDefined()) {
    if (auto b = d.Bool(v, "metrics.native_histograms")) c.native_histograms = *b;
  }
  if (const YAML::Node v = n["families"]; v.IsDefined()) DecodeMetricFamilies(d, v, c);
}

void DecodePeers(Decoder& d, const YAML::Node& n, Config& c) {
  if (!n.IsDefined() || !d.CheckMap(n, "peers", {"static", "kubernetes"})) return;
  if (const YAML::Node k = n["kubernetes"]; k.IsDefined() && !k.IsNull()) {
    DecodeKubernetesPeers(d, k, c);
  }
  const YAML::Node list = n["static"];
  if (!list.IsDefined() || list.IsNull()) return;
  if (!list.IsSequence()) {
    d.Fail(list, "peers.static", "must be a list of peers");
    return;
  }
  std::map<std::string, std::string> names;                      // name → first path
  std::map<std::pair<std::string, int>, std::string> endpoints;  // (address, port) → path
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node p = list[i];
    std::string path = "peers.static[" + std::to_string(i) + "]";
    if (!p.IsMap()) {
      d.Fail(p, path, "must be a mapping with name and address");
      continue;
    }
    d.CheckMap(p, path, {"name", "address", "port", "burst_port", "node", "zone"});
    StaticPeer peer;
    bool ok = true;
    if (const YAML::Node v = p["name"]; v.IsDefined() && !v.IsNull()) {
      auto s = d.String(v, path + ".name");
      ok = ok && s && !s->empty();
      if (s && s->empty()) d.Fail(v, path + ".name", "must not be empty");
      if (s && !s->empty()) {
        peer.name = *s;
        auto [it, fresh] = names.emplace(*s, path);
        if (!fresh) {
          d.Fail(v, path + ".name",
                 "duplicate peer name " + Quote(*s) + " (also " + it->second + ")");
          ok = false;
        }
      }
    } else {
      d.Fail(p, path + ".name", "required");
      ok = false;
    }
    if (const YAML::Node v = p["address"]; v.IsDefined() && !v.IsNull()) {
      if (auto s = d.String(v, path + ".address")) {
        if (auto ip = net::ParseIp(*s)) {
          peer.address = *ip;
        } else {
          d.Fail(v, path + ".address", "must be an IPv4 or IPv6 address, got " + Quote(*s));
          ok = false;
        }
      } else {
        ok = false;
      }
    } else {
      d.Fail(p, path + ".address", "required");
      ok = false;
    }
    ok = DecodePeerPorts(d, p, path, &peer.port, &peer.burst_port) && ok;
    for (auto [key, out] : {std::pair<const char*, std::string*>{"node", &peer.node},
                            std::pair<const char*, std::string*>{"zone", &peer.zone}}) {
      if (const YAML::Node v = p[key]; v.IsDefined() && !v.IsNull()) {
        if (auto s = d.String(v, path + "." + key)) *out = *s;
      }
    }
    if (!ok) continue;
    auto [it, fresh] = endpoints.emplace(std::pair{peer.address.to_string(), int{peer.port}}, path);
    if (!fresh) {
      d.Fail(p["address"], path + ".address",
             "same address and port as " + it->second + " (one peer would be probed twice)");
      continue;
    }
    c.static_peers.push_back(std::move(peer));
  }
}

void DecodeRtt(Decoder& d, const YAML::Node& n, Config& c) {
  const std::string base = "probes.rtt";
  if (!d.CheckMap(n, base, {"protocol", "interval", "count", "spacing", "timeout", "size"})) return;
  RttOptions o;
  if (const YAML::Node v = n["protocol"]; v.IsDefined()) {
    if (auto s = d.String(v, base + ".protocol")) {
      if (*s == "icmp") {
        o.protocol = RttProtocol::kIcmp;
      } else if (*s == "udp") {
        o.protocol = RttProtocol::kUdp;
      } else {
        d.Fail(v, base + ".protocol", "must be \"icmp\" or \"udp\", got " + Quote(*s));
      }
    }
  }
  for (auto [key, out] : {std::pair<const char*, Duration*>{"interval", &o.interval},
                          std::pair<const char*, Duration*>{"spacing", &o.spacing},
                          std::pair<const char*, Duration*>{"timeout", &o.timeout}}) {
    if (const YAML::Node v = n[key]; v.IsDefined()) {
      if (auto dur = d.PositiveDuration(v, base + "." + key)) *out = *dur;
    }
  }
  if (const YAML::Node v = n["count"]; v.IsDefined()) {
    if (auto i = d.Integer(v, base + ".count", 1, 10000)) o.count = static_cast<int>(*i);
  }
  if (const YAML::Node v = n["size"]; v.IsDefined()) {
    if (auto i = d.Integer(v, base + ".size", 16, 9000)) o.size = static_cast<int>(*i);
  }
  // A train must end (last send + timeout) before the next one starts, or trains of one peer
  // would overlap and the loss of one would be charged to the other.
  // Checked arithmetic: 999 * 1y does not fit in 64-bit nanoseconds and must not wrap round
  // to a short (or negative) train that passes the check.
  std::int64_t train_ns = 0;
  bool overflow = __builtin_mul_overflow(o.spacing.count(), std::int64_t{o.count - 1}, &train_ns) ||
                  __builtin_add_overflow(train_ns, o.timeout.count(), &train_ns);
  if (overflow) {
    d.Fail(n, base,
           "a train lasts (count-1)*spacing + timeout, more than 292 years, longer than "
           "interval " +
               FormatDuration(o.interval));
  } else if (Duration train(train_ns); train > o.interval) {
    d.Fail(n, base,
           "a train lasts (count-1)*spacing + timeout = " + FormatDuration(train) +
               ", longer than interval " + FormatDuration(o.interval));
  }
  c.rtt = o;
}

// A host name as getaddrinfo takes it: 1..253 characters (one trailing dot allowed), labels of
// 1..63 characters, no blanks.
bool ValidDnsName(const std::string& name) {
  std::string n = name;
  if (!n.empty() && n.back() == '.') n.pop_back();
  if (n.empty() || n.size() > 253) return false;
  std::size_t label = 0;
  for (char ch : n) {
    if (ch == '.') {
      if (label == 0) return false;
      label = 0;
    } else if (ch <= ' ' || ch == 0x7f || ch == '|') {
      return false;
    } else if (++label > 63) {
      return false;
    }
  }
  return label > 0;
}

// A Kubernetes object name as namespaces and Services take it: an RFC 1123 label (1..63
// characters of a-z, 0-9 and '-', starting and ending with a letter or digit; Kubernetes
// apimachinery validation.IsDNS1123Label).
bool ValidDns1123Label(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
  });
}

// A section that is a switch or a mapping (probes.dns.cluster_dns, .sample): `false` turns it
// off (`out` reset); `true`, null or a mapping of `known` keys turns it on, `out` kept as its
// default or set to T's defaults when it was off, for the caller to fill from the mapping (true
// returned); anything else fails in `d` and leaves `out` as it was.
template <typename T>
bool SectionOn(Decoder& d, const YAML::Node& n, const std::string& path,
               std::initializer_list<std::string_view> known, std::optional<T>& out) {
  if (n.IsScalar()) {
    auto on = d.Bool(n, path);
    if (on && !*on) out.reset();
    if (!on || !*on) return false;
  } else if (!d.CheckMap(n, path, known)) {
    return false;
  }
  if (!out) out.emplace();
  return true;
}

// probes.dns.cluster_dns: `false` turns it off, `true` or a mapping (absent keys take their
// defaults) turns it on. Meaningful only with peers.kubernetes (its API server and credentials).
void DecodeClusterDns(Decoder& d, const YAML::Node& n, bool kubernetes,
                      probes::dns::DnsOptions& o) {
  const std::string base = "probes.dns.cluster_dns";
  if (!SectionOn(d, n, base, {"namespace", "service", "port", "max_servers"}, o.cluster_dns)) {
    return;
  }
  probes::dns::ClusterDnsOptions& cd = *o.cluster_dns;
  if (n.IsMap()) {
    for (auto [key, out] : {std::pair<const char*, std::string*>{"namespace", &cd.namespace_name},
                            std::pair<const char*, std::string*>{"service", &cd.service}}) {
      const YAML::Node v = n[key];
      if (!v.IsDefined()) continue;
      auto s = d.String(v, base + "." + key);
      if (s && !ValidDns1123Label(*s)) {
        d.Fail(v, base + "." + key,
               "must be a Kubernetes name (1-63 characters of a-z, 0-9 and '-'), got " + Quote(*s));
      } else if (s) {
        *out = *s;
      }
    }
    if (const YAML::Node v = n["port"]; v.IsDefined()) {
      if (auto i = d.Integer(v, base + ".port", 1, 65535)) cd.port = static_cast<std::uint16_t>(*i);
    }
    if (const YAML::Node v = n["max_servers"]; v.IsDefined()) {
      if (auto i = d.Integer(v, base + ".max_servers", 1, 256)) {
        cd.max_servers = static_cast<int>(*i);
      }
    }
  }
  if (!kubernetes) {
    d.Fail(n, base,
           "needs peers.kubernetes (the DNS endpoints are read from its API server); remove it "
           "or set it to false");
  }
}

// probes.dns.sample: `false` turns it off (every Pod runs the lookups), `true` or a mapping
// (absent keys take their defaults) turns it on. Meaningful only with peers.kubernetes (the Pods
// it draws from).
void DecodeDnsSample(Decoder& d, const YAML::Node& n, bool kubernetes, probes::dns::DnsOptions& o) {
  const std::string base = "probes.dns.sample";
  if (!SectionOn(d, n, base, {"pods_per_zone", "replica_pods_per_zone", "period"}, o.sample)) {
    return;
  }
  probes::dns::DnsSampleOptions& sample = *o.sample;
  if (n.IsMap()) {
    if (const YAML::Node v = n["pods_per_zone"]; v.IsDefined()) {
      if (auto i = d.Integer(v, base + ".pods_per_zone", 1, 1000)) {
        sample.pods_per_zone = static_cast<int>(*i);
      }
    }
    if (const YAML::Node v = n["replica_pods_per_zone"]; v.IsDefined()) {
      if (auto i = d.Integer(v, base + ".replica_pods_per_zone", 1, 1000)) {
        sample.replica_pods_per_zone = static_cast<int>(*i);
      }
    }
    if (const YAML::Node v = n["period"]; v.IsDefined()) {
      if (auto dur = d.PositiveDuration(v, base + ".period")) {
        if (*dur < o.interval) {
          d.Fail(v, base + ".period",
                 "must be at least probes.dns.interval (" + FormatDuration(o.interval) + "), got " +
                     FormatDuration(*dur));
        } else {
          sample.period = *dur;
        }
      }
    }
  }
  if (!kubernetes) {
    d.Fail(n, base,
           "needs peers.kubernetes (the Pods it draws from are discovered); remove it or set it "
           "to false");
  }
}

void DecodeDns(Decoder& d, const YAML::Node& n, bool kubernetes, Config& c) {
  const std::string base = "probes.dns";
  if (!d.CheckMap(n, base,
                  {"interval", "resolv_conf", "resolvers", "names", "cluster_dns", "sample"})) {
    return;
  }
  probes::dns::DnsOptions o;
  if (const YAML::Node v = n["cluster_dns"]; v.IsDefined()) {
    DecodeClusterDns(d, v, kubernetes, o);
  } else if (!kubernetes) {
    o.cluster_dns.reset();  // the default is on, but only where there is an API server to ask
  }
  if (const YAML::Node v = n["interval"]; v.IsDefined()) {
    if (auto dur = d.PositiveDuration(v, base + ".interval")) o.interval = *dur;
  }
  // A sample drawn more often than the lookups run leaves periods without a round (a zone
  // without lookups) and makes and drops the series every round: the default period follows a
  // longer interval (DecodeDnsSample refuses a period written shorter).
  o.sample->period = std::max(o.sample->period, o.interval);
  if (const YAML::Node v = n["sample"]; v.IsDefined()) {
    DecodeDnsSample(d, v, kubernetes, o);
  } else if (!kubernetes) {
    o.sample.reset();  // on by default, but only where there are discovered Pods to draw from
  }
  if (const YAML::Node v = n["resolv_conf"]; v.IsDefined()) {
    if (auto s = d.String(v, base + ".resolv_conf")) {
      if (s->empty()) {
        d.Fail(v, base + ".resolv_conf", "must not be empty");
      } else {
        o.resolv_conf = *s;
      }
    }
  }
  if (const YAML::Node v = n["resolvers"]; v.IsDefined()) {
    o.resolvers.clear();
    if (!v.IsSequence() || v.size() == 0) {
      d.Fail(v, base + ".resolvers", "must be a non-empty list of glibc, musl");
    } else {
      for (std::size_t i = 0; i < v.size(); ++i) {
        std::string path = base + ".resolvers[" + std::to_string(i) + "]";
        auto s = d.String(v[i], path);
        if (!s) continue;
        auto libc = probes::dns::ParseLibc(*s);
        if (!libc) {
          d.Fail(v[i], path, "must be \"glibc\" or \"musl\", got " + Quote(*s));
        } else if (std::find(o.resolvers.begin(), o.resolvers.end(), *libc) != o.resolvers.end()) {
          d.Fail(v[i], path, "duplicate resolver " + Quote(*s));
        } else {
          o.resolvers.push_back(*libc);
        }
      }
    }
  }
  const YAML::Node names = n["names"];
  if (!names.IsDefined() || names.IsNull() || !names.IsSequence() || names.size() == 0) {
    d.Fail(names.IsDefined() ? names : n, base + ".names",
           "required: a non-empty list of names to look up");
  } else {
    for (std::size_t i = 0; i < names.size(); ++i) {
      std::string path = base + ".names[" + std::to_string(i) + "]";
      auto s = d.String(names[i], path);
      if (!s) continue;
      if (!ValidDnsName(*s)) {
        d.Fail(names[i], path, "not a valid DNS name: " + Quote(*s));
      } else if (std::find(o.names.begin(), o.names.end(), *s) != o.names.end()) {
        d.Fail(names[i], path, "duplicate name " + Quote(*s));
      } else {
        o.names.push_back(*s);
      }
    }
  }
  c.dns = o;
}

// A positive byte size at `v` (e.g. 500MB, 20GB, 1GiB).
std::optional<std::uint64_t> PositiveSize(Decoder& d, const YAML::Node& v,
                                          const std::string& path) {
  auto s = d.String(v, path);
  if (!s) return std::nullopt;
  auto size = ParseSize(*s);
  if (!size || *size == 0) {
    d.Fail(v, path, "must be a positive size (examples: 500MB, 20GB, 1GiB), got " + Quote(*s));
    return std::nullopt;
  }
  return size;
}

// probes.burst.coordinated; checked against o.interval, which DecodeBurst read first.
void DecodeCoordinated(Decoder& d, const YAML::Node& n, const std::string& burst, BurstOptions& o) {
  const std::string base = burst + ".coordinated";
  if (!d.CheckMap(n, base, {"period", "max_bytes_per_burst"})) return;
  if (const YAML::Node v = n["period"]; v.IsDefined()) {
    if (auto dur = d.PositiveDuration(v, base + ".period")) {
      if (*dur < o.interval) {
        // A Pod decides at its rounds: a period without one would never be probed.
        d.Fail(v, base + ".period",
               "must be at least " + burst + ".interval (" + FormatDuration(o.interval) +
                   "), got " + FormatDuration(*dur));
      } else {
        o.coordinated.period = *dur;
      }
    }
  }
  if (const YAML::Node v = n["max_bytes_per_burst"]; v.IsDefined()) {
    if (auto size = PositiveSize(d, v, base + ".max_bytes_per_burst")) {
      if (*size < 1'000'000) {
        d.Fail(v, base + ".max_bytes_per_burst",
               "must be at least 1MB (a smaller burst never leaves slow start), got " +
                   std::to_string(*size) + " bytes");
      } else {
        o.coordinated.max_bytes_per_burst = *size;
      }
    }
  }
}

void DecodeBurst(Decoder& d, const YAML::Node& n, Config& c) {
  const std::string base = "probes.burst";
  if (!d.CheckMap(
          n, base,
          {"interval", "duration", "streams", "max_bytes_per_hour", "timeout", "coordinated"})) {
    return;
  }
  BurstOptions o;
  for (auto [key, out] : {std::pair<const char*, Duration*>{"interval", &o.interval},
                          std::pair<const char*, Duration*>{"duration", &o.duration},
                          std::pair<const char*, Duration*>{"timeout", &o.step_timeout}}) {
    if (const YAML::Node v = n[key]; v.IsDefined()) {
      if (auto dur = d.PositiveDuration(v, base + "." + key)) *out = *dur;
    }
  }
  if (o.duration < std::chrono::milliseconds(100) || o.duration > std::chrono::seconds(60)) {
    d.Fail(n["duration"].IsDefined() ? n["duration"] : n, base + ".duration",
           "must be from 100ms to 60s, got " + FormatDuration(o.duration));
  }
  if (const YAML::Node v = n["streams"]; v.IsDefined()) {
    o.streams.clear();
    if (!v.IsSequence() || v.size() == 0) {
      d.Fail(v, base + ".streams", "must be a non-empty list of stream counts, e.g. [1, 8]");
    } else {
      for (std::size_t i = 0; i < v.size(); ++i) {
        std::string path = base + ".streams[" + std::to_string(i) + "]";
        if (auto k = d.Integer(v[i], path, 1, 128)) {
          if (std::find(o.streams.begin(), o.streams.end(), *k) != o.streams.end()) {
            d.Fail(v[i], path, "duplicate stream count " + std::to_string(*k));
          } else {
            o.streams.push_back(static_cast<int>(*k));
          }
        }
      }
    }
  }
  if (const YAML::Node v = n["max_bytes_per_hour"]; v.IsDefined()) {
    if (auto size = PositiveSize(d, v, base + ".max_bytes_per_hour")) o.max_bytes_per_hour = *size;
  }
  // The default period follows an interval longer than itself (each period needs a round).
  o.coordinated.period = std::max(o.coordinated.period, o.interval);
  if (const YAML::Node v = n["coordinated"]; v.IsDefined()) DecodeCoordinated(d, v, base, o);
  if (o.step_timeout > std::chrono::seconds(60)) {
    d.Fail(n["timeout"], base + ".timeout",
           "must be at most 60s, got " + FormatDuration(o.step_timeout));
    o.step_timeout = std::chrono::seconds(60);
  }
  // A round (one burst per stream count, each with up to ~4 control steps around it) must
  // end before the next round of the same peer is due.
  Duration round = (o.duration + 4 * o.step_timeout) * static_cast<int>(o.streams.size());
  if (round > o.interval) {
    d.Fail(n, base,
           "a round lasts up to (duration + 4*timeout) x len(streams) = " + FormatDuration(round) +
               ", longer than interval " + FormatDuration(o.interval));
  }
  c.burst = o;
}

// Optional keys of a probe section: each one present is decoded into its field.
void OptionalDurations(Decoder& d, const YAML::Node& n, const std::string& base,
                       std::initializer_list<std::pair<const char*, Duration*>> fields) {
  for (auto [key, out] : fields) {
    if (const YAML::Node v = n[key]; v.IsDefined()) {
      if (auto dur = d.PositiveDuration(v, base + "." + key)) *out = *dur;
    }
  }
}

template <typename T>
void OptionalInteger(Decoder& d, const YAML::Node& n, const std::string& base, const char* key,
                     long long min, long long max, T* out) {
  if (const YAML::Node v = n[key]; v.IsDefined()) {
    if (auto i = d.Integer(v, base + "." + key, min, max)) *out = static_cast<T>(*i);
  }
}

void DecodeHttp(Decoder& d, const YAML::Node& n, Config& c) {
  const std::string base = "probes.http";
  if (!d.CheckMap(n, base,
                  {"interval", "duration", "qps", "connections", "modes", "timeout", "path",
                   "max_body_bytes"})) {
    return;
  }
  HttpOptions o;
  OptionalDurations(
      d, n, base, {{"interval", &o.interval}, {"duration", &o.duration}, {"timeout", &o.timeout}});
  OptionalInteger(d, n, base, "qps", 1, 10000, &o.qps);
  OptionalInteger(d, n, base, "connections", 1, 64, &o.connections);
  if (const YAML::Node v = n["modes"]; v.IsDefined()) {
    if (!v.IsSequence() || v.size() == 0) {
      d.Fail(v, base + ".modes", "must be a non-empty list of keepalive, new_connection");
    } else {
      o.keepalive = o.new_connection = false;
      for (std::size_t i = 0; i < v.size(); ++i) {
        std::string path = base + ".modes[" + std::to_string(i) + "]";
        auto s = d.String(v[i], path);
        if (!s) continue;
        bool* mode = *s == "keepalive"        ? &o.keepalive
                     : *s == "new_connection" ? &o.new_connection
                                              : nullptr;
        if (mode == nullptr) {
          d.Fail(v[i], path, "must be \"keepalive\" or \"new_connection\", got " + Quote(*s));
        } else if (*mode) {
          d.Fail(v[i], path, "duplicate mode " + Quote(*s));
        } else {
          *mode = true;
        }
      }
    }
  }
  if (const YAML::Node v = n["path"]; v.IsDefined()) {
    if (auto s = d.String(v, base + ".path")) {
      if (s->empty() || s->front() != '/' || s->find_first_of(" \r\n\t") != std::string::npos) {
        d.Fail(v, base + ".path", "must be a request path starting with /, got " + Quote(*s));
      } else {
        o.path = *s;
      }
    }
  }
  if (const YAML::Node v = n["max_body_bytes"]; v.IsDefined()) {
    if (auto s = d.String(v, base + ".max_body_bytes")) {
      auto size = ParseSize(*s);
      if (!size || *size == 0 || *size > (std::uint64_t{64} << 20)) {
        d.Fail(v, base + ".max_body_bytes", "must be a size from 1 to 64MiB, got " + Quote(*s));
      } else {
        o.max_body_bytes = *size;
      }
    }
  }
  // A round (keep-alive connects, then each mode's run and its last request's timeout) must end
  // before the next one is due. Each term is at most ~1e18 ns only if small: check overflow.
  int modes = int{o.keepalive} + int{o.new_connection};
  std::int64_t round_ns = 0;
  bool overflow = __builtin_add_overflow(o.duration.count(), o.timeout.count(), &round_ns) ||
                  __builtin_mul_overflow(round_ns, std::int64_t{modes}, &round_ns) ||
                  __builtin_add_overflow(round_ns, o.keepalive ? o.timeout.count() : 0, &round_ns);
  if (overflow || Duration(round_ns) > o.interval) {
    d.Fail(n, base,
           "a round lasts modes*(duration + timeout) (+ timeout to open keep-alive "
           "connections)" +
               (overflow ? std::string() : " = " + FormatDuration(Duration(round_ns))) +
               ", longer than interval " + FormatDuration(o.interval));
  }
  c.http = o;
}

void DecodeGrpc(Decoder& d, const YAML::Node& n, Config& c) {
  const std::string base = "probes.grpc";
  if (!GrpcBuilt(d, n, base) ||
      !d.CheckMap(n, base, {"interval", "count", "spacing", "timeout", "port"})) {
    return;
  }
  GrpcOptions o;
  OptionalDurations(d, n, base,
                    {{"interval", &o.interval}, {"spacing", &o.spacing}, {"timeout", &o.timeout}});
  OptionalInteger(d, n, base, "count", 1, 1000, &o.count);
  OptionalInteger(d, n, base, "port", 1, 65535, &o.port);
  std::int64_t round_ns = 0;
  bool overflow = __builtin_mul_overflow(o.spacing.count(), std::int64_t{o.count - 1}, &round_ns) ||
                  __builtin_add_overflow(round_ns, o.timeout.count(), &round_ns);
  if (overflow || Duration(round_ns) > o.interval) {
    d.Fail(n, base,
           "a round lasts (count-1)*spacing + timeout, longer than interval " +
               FormatDuration(o.interval));
  }
  c.grpc = o;
}

// A DNS-1123 label as Kubernetes names namespaces and Services: 1..63 of [a-z0-9-], starting and
// ending with an alphanumeric (kubernetes.io/docs/concepts/overview/working-with-objects/names).
bool ValidKubernetesName(std::string_view s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char ch : s) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-')) return false;
  }
  return true;
}

// NAME.NAMESPACE.svc or NAME.NAMESPACE.svc.DOMAIN (a trailing dot allowed): the Service DNS
// names of the Kubernetes DNS specification (github.com/kubernetes/dns, docs/specification.md,
// "2.3.1 A/AAAA records"), as {namespace, name}; std::nullopt for any other name.
std::optional<std::pair<std::string, std::string>> ServiceOfDnsName(std::string name) {
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  std::vector<std::string> labels;
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    labels.push_back(name.substr(start, dot - start));
    start = dot + 1;
  }
  if (!labels.empty() && labels.back().empty()) labels.pop_back();  // the trailing dot
  if (labels.size() < 3 || labels[2] != "svc") return std::nullopt;
  if (!ValidKubernetesName(labels[0]) || !ValidKubernetesName(labels[1])) return std::nullopt;
  return std::make_pair(labels[1], labels[0]);
}

void DecodeServiceTarget(Decoder& d, const YAML::Node& t, const std::string& path,
                         std::map<std::string, std::string>& names,
                         probes::service::ServiceOptions& o) {
  using probes::service::ServiceProtocol;
  if (!t.IsMap()) {
    d.Fail(t, path, "must be a mapping with name, address, port and protocol");
    return;
  }
  d.CheckMap(t, path, {"name", "address", "port", "protocol", "kubernetes_service"});
  probes::service::ServiceTarget target;
  bool ok = RequiredStrings(d, t, path, {{"name", &target.name}, {"address", &target.address}});
  if (!target.name.empty()) {
    auto [it, fresh] = names.emplace(target.name, path);
    if (!fresh) {
      d.Fail(t["name"], path + ".name",
             "duplicate target name " + Quote(target.name) + " (also " + it->second + ")");
      ok = false;
    }
  }
  if (!target.address.empty() && !net::ParseIp(target.address) && !ValidDnsName(target.address)) {
    d.Fail(t["address"], path + ".address",
           "must be an IP address or a DNS name, got " + Quote(target.address));
    ok = false;
  }
  if (const YAML::Node v = t["port"]; v.IsDefined()) {
    if (auto p = d.Integer(v, path + ".port", 1, 65535)) {
      target.port = static_cast<std::uint16_t>(*p);
    } else {
      ok = false;
    }
  }
  if (const YAML::Node v = t["protocol"]; v.IsDefined()) {
    if (auto s = d.String(v, path + ".protocol"); !s) {
      ok = false;
    } else if (*s == "udp" || *s == "http") {
      target.protocol = *s == "udp" ? ServiceProtocol::kUdp : ServiceProtocol::kHttp;
    } else {
      d.Fail(v, path + ".protocol", "must be \"udp\" or \"http\", got " + Quote(*s));
      ok = false;
    }
  }
  if (const YAML::Node v = t["kubernetes_service"]; v.IsDefined()) {
    auto s = d.String(v, path + ".kubernetes_service");
    std::size_t slash = s ? s->find('/') : std::string::npos;
    if (!s) {
      ok = false;
    } else if (slash == std::string::npos || !ValidKubernetesName(s->substr(0, slash)) ||
               !ValidKubernetesName(s->substr(slash + 1))) {
      d.Fail(v, path + ".kubernetes_service",
             "must be NAMESPACE/NAME (lower-case DNS labels), got " + Quote(*s));
      ok = false;
    } else {
      target.kubernetes_namespace = s->substr(0, slash);
      target.kubernetes_name = s->substr(slash + 1);
    }
  } else if (auto svc = ServiceOfDnsName(target.address)) {
    std::tie(target.kubernetes_namespace, target.kubernetes_name) = *svc;
  }
  if (ok) o.targets.push_back(std::move(target));
}

void DecodeService(Decoder& d, const YAML::Node& n, Config& c) {
  const std::string base = "probes.service";
  if (!d.CheckMap(n, base, {"interval", "count", "spacing", "timeout", "targets"})) return;
  probes::service::ServiceOptions o;
  OptionalDurations(d, n, base,
                    {{"interval", &o.interval}, {"spacing", &o.spacing}, {"timeout", &o.timeout}});
  OptionalInteger(d, n, base, "count", 1, 1000, &o.count);
  const YAML::Node targets = n["targets"];
  if (!targets.IsDefined() || targets.IsNull() || !targets.IsSequence() || targets.size() == 0) {
    d.Fail(targets.IsDefined() ? targets : n, base + ".targets",
           "required: a non-empty list of {name, address, port, protocol}");
  } else {
    std::map<std::string, std::string> names;  // name → first path
    for (std::size_t i = 0; i < targets.size(); ++i) {
      DecodeServiceTarget(d, targets[i], base + ".targets[" + std::to_string(i) + "]", names, o);
    }
  }
  // A round: resolving (up to timeout), the requests (count-1)*spacing apart, the last one's
  // timeout; it must end before the next round of the same target is due.
  std::int64_t round_ns = 0;
  bool overflow = __builtin_mul_overflow(o.spacing.count(), std::int64_t{o.count - 1}, &round_ns) ||
                  __builtin_add_overflow(round_ns, o.timeout.count(), &round_ns) ||
                  __builtin_add_overflow(round_ns, o.timeout.count(), &round_ns);
  if (overflow || Duration(round_ns) > o.interval) {
    d.Fail(n, base,
           "a round lasts timeout + (count-1)*spacing + timeout" +
               (overflow ? std::string() : " = " + FormatDuration(Duration(round_ns))) +
               ", longer than interval " + FormatDuration(o.interval));
  }
  c.service = o;
}

void DecodeMtu(Decoder& d, const YAML::Node& n, Config& c) {
  const std::string base = "probes.mtu";
  if (!d.CheckMap(n, base, {"interval", "timeout", "min_size", "max_size", "max_datagrams"})) {
    return;
  }
  probes::mtu::MtuOptions o;
  OptionalDurations(d, n, base, {{"interval", &o.interval}, {"timeout", &o.timeout}});
  // 9028: the UDP echo responder answers payloads of at most 9,000 bytes (+ 28 of IPv4 and UDP).
  OptionalInteger(d, n, base, "min_size", 576, 9028, &o.min_size);
  OptionalInteger(d, n, base, "max_size", 576, 9028, &o.max_size);
  OptionalInteger(d, n, base, "max_datagrams", 2, 64, &o.max_datagrams);
  if (o.min_size >= o.max_size) {
    d.Fail(n, base,
           "min_size (" + std::to_string(o.min_size) + ") must be below max_size (" +
               std::to_string(o.max_size) + ")");
  }
  // A round: two directions of at most max_datagrams each, every one waiting up to timeout.
  std::int64_t round_ns = 0;
  bool overflow =
      __builtin_mul_overflow(o.timeout.count(), std::int64_t{2 * o.max_datagrams}, &round_ns);
  if (overflow || Duration(round_ns) > o.interval) {
    d.Fail(n, base,
           "a round lasts up to 2*max_datagrams*timeout" +
               (overflow ? std::string() : " = " + FormatDuration(Duration(round_ns))) +
               ", longer than interval " + FormatDuration(o.interval));
  }
  c.mtu = o;
}

// `kubernetes`: the file has a peers.kubernetes section (valid or not: its own problems are
// reported there, not again by the sections that need it).
void DecodeProbes(Decoder& d, const YAML::Node& n, bool kubernetes, Config& c) {
  if (!n.IsDefined() ||
      !d.CheckMap(n, "probes", {"rtt", "dns", "burst", "http", "grpc", "service", "mtu"})) {
    return;
  }
  if (const YAML::Node service = n["service"]; service.IsDefined()) DecodeService(d, service, c);
  if (const YAML::Node rtt = n["rtt"]; rtt.IsDefined()) DecodeRtt(d, rtt, c);
  if (const YAML::Node dns = n["dns"]; dns.IsDefined()) DecodeDns(d, dns, kubernetes, c);
  if (const YAML::Node burst = n["burst"]; burst.IsDefined()) DecodeBurst(d, burst, c);
  if (const YAML::Node http = n["http"]; http.IsDefined()) DecodeHttp(d, http, c);
  if (const YAML::Node grpc = n["grpc"]; grpc.IsDefined()) DecodeGrpc(d, grpc, c);
  if (const YAML::Node mtu = n["mtu"]; mtu.IsDefined()) DecodeMtu(d, mtu, c);
}

}  // namespace

LoadResult Parse(const std::string& text, const std::string& file, const EnvLookup& env) {
  return Parse(text, file, env, nullptr);
}

LoadResult Parse(const std::string& text, const std::string& file, const EnvLookup& env,
                 std::set<std::string>* known_keys) {
  LoadResult result;
  auto loaded = LoadYaml(text, file, &result.errors);
  if (!loaded) return result;
  const YAML::Node root = *loaded;
  auto c = std::make_shared<Config>();
  c->file = file;
  Decoder d(file, env, &result.errors, &result.warnings);
  d.RecordKnownKeys(known_keys);
  try {
    if (!root.IsMap() && !root.IsNull()) {
      d.Fail(root, "", "the configuration must be a mapping at the top level");
      return result;
    }
    d.CheckMap(root, "", {"listen_address", "self", "responders", "peers", "probes", "metrics"});
    if (const YAML::Node la = root["listen_address"]; la.IsDefined()) {
      if (auto hp = d.ListenAddress(la, "listen_address")) c->listen_address = *hp;
    }
    DecodeSelf(d, root, root["self"], *c);
    DecodeResponders(d, root["responders"], *c);
    DecodePeers(d, root["peers"], *c);
    const YAML::Node peers = root["peers"];
    bool kubernetes = peers.IsDefined() && peers.IsMap() && peers["kubernetes"].IsDefined() &&
                      !peers["kubernetes"].IsNull();
    DecodeProbes(d, root["probes"], kubernetes, *c);
    DecodeMetrics(d, root["metrics"], *c);
  } catch (const YAML::Exception& e) {  // defensive: yaml-cpp throws on odd node shapes
    d.Fail(root, "", std::string("unexpected YAML structure: ") + e.what());
  }
  // In file order, whichever section's check found them (a file's reader fixes top down).
  auto by_place = [](const Error& a, const Error& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  };
  std::stable_sort(result.errors.begin(), result.errors.end(), by_place);
  std::stable_sort(result.warnings.begin(), result.warnings.end(), by_place);
  result.not_shown = d.not_shown();
  if (d.not_shown() > 0) {  // after the sort: last, whatever its line
    result.errors.push_back(Error{file, 0, 0, "",
                                  std::to_string(d.not_shown()) +
                                      (d.not_shown() == 1 ? " more problem" : " more problems") +
                                      " not shown"});
  }
  if (result.errors.empty()) result.config = std::move(c);
  return result;
}

std::vector<std::string> EnabledProbes(const Config& c) {
  std::vector<std::string> out;
  if (c.rtt) out.push_back("rtt");
  if (c.http) out.push_back("http");
  if (c.grpc) out.push_back("grpc");
  if (c.burst) out.push_back("burst");
  if (c.dns) out.push_back("dns");
  if (c.service) out.push_back("service");
  if (c.mtu) out.push_back("mtu");
  return out;
}

std::string Summary(const Config& c) {
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
    return out.empty() ? std::string("none") : out;
  };
  std::vector<std::string> discovery;
  discovery.push_back(std::to_string(c.static_peers.size()) + " static");
  if (c.kubernetes) {
    discovery.push_back("kubernetes service " + c.kubernetes->namespace_name + "/" +
                        c.kubernetes->service + " (" +
                        std::to_string(c.kubernetes->peers_per_zone) + " per zone" +
                        (c.kubernetes->discovery == KubernetesPeers::Discovery::kDns
                             ? ", from the DNS records of " + c.kubernetes->DnsName()
                             : "") +
                        ")");
  }
  if (c.dns && c.dns->cluster_dns) {
    discovery.push_back("DNS servers of kubernetes service " + c.dns->cluster_dns->namespace_name +
                        "/" + c.dns->cluster_dns->service);
  }
  std::vector<std::string> responders = {"http /echo", "udp_echo"};
  if (c.burst_responder) responders.push_back("burst");
  if (c.grpc_listen_address) responders.push_back("grpc");
  return "self " + c.self.name + " on node " + c.self.node +
         (c.self.zone.empty() ? "" : " in zone " + c.self.zone) + "; peers: " + list(discovery) +
         "; probes: " + list(EnabledProbes(c)) + "; responders: " + list(responders);
}

LoadResult LoadFile(const std::string& path, const EnvLookup& env) {
  std::string error;
  auto text = ReadRegularFile(path, kMaxFileBytes, &error);
  if (!text) {
    LoadResult r;
    r.errors.push_back(Error{path, 0, 0, "", "cannot read the file: " + error});
    return r;
  }
  return Parse(*text, path, env);
}

}  // namespace podnet::config
