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
#include "exporter/config/names.h"
#include "exporter/config/read_file.h"
#include "exporter/config/text_checks.h"

namespace podnet::config {

using kinds::burst::BurstResponderOptions;

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

void DecodeGrpcResponder(Decoder& d, const YAML::Node& n, Config& c) {
  const std::string base = "responders.grpc";
  if (!n.IsDefined() || !kinds::grpc::Built(d, n, base) ||
      !d.CheckMap(n, base, {"listen_address"})) {
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

// peers.kubernetes.discovery and auto_dns_from into `k`; false when either is bad.
bool DecodeDiscoveryMode(Decoder& d, const YAML::Node& n, const std::string& base,
                         KubernetesPeers& k) {
  bool ok = true;
  if (const YAML::Node v = n["discovery"]; v.IsDefined()) {
    auto s = d.String(v, base + ".discovery");
    if (s && *s == "watch") {
      k.discovery = KubernetesPeers::Discovery::kWatch;
    } else if (s && *s == "dns") {
      k.discovery = KubernetesPeers::Discovery::kDns;
    } else if (s && *s == "auto") {
      k.discovery = KubernetesPeers::Discovery::kAuto;
    } else {
      if (s) d.Fail(v, base + ".discovery", "must be watch, dns or auto, got \"" + *s + "\"");
      ok = false;
    }
  }
  if (const YAML::Node v = n["auto_dns_from"]; v.IsDefined()) {
    // From 4 (below, the hysteresis band, 3/4 of it up to it, holds no whole count but the
    // threshold), to below kDnsAnswerRoom (above, a DNS message may not hold them all:
    // discovery/kubernetes/auto_source.h).
    if (auto i = d.Integer(v, base + ".auto_dns_from", 4, 3399)) {
      k.auto_dns_from = static_cast<int>(*i);
    } else {
      ok = false;
    }
  }
  return ok;
}

void DecodeKubernetesPeers(Decoder& d, const YAML::Node& n, Config& c) {
  const std::string base = "peers.kubernetes";
  if (!d.CheckMap(n, base,
                  {"namespace", "service", "peers_per_zone", "port", "burst_port", "discovery",
                   "auto_dns_from", "dns_name", "dns_refresh"})) {
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
  ok = DecodeDiscoveryMode(d, n, base, k) && ok;
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

// The kinds' family name prefixes for a message: "podnet_rtt_*, podnet_http_*, ...", each the
// part its families' names share, up to its last underscore.
std::string FamilyPrefixes() {
  std::string out;
  for (const auto& s : kProbeSections) {
    auto families = s.families;
    if (families.empty()) continue;
    std::string_view prefix = families.front().name;
    for (const auto& f : families) {
      std::size_t n = 0;
      while (n < prefix.size() && n < f.name.size() && prefix[n] == f.name[n]) ++n;
      prefix = prefix.substr(0, n);
    }
    prefix = prefix.substr(0, prefix.rfind('_') + 1);
    out += (out.empty() ? "" : ", ") + std::string(prefix) + "*";
  }
  return out;
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
             "unknown metric family: the names that switch are the probe kinds' families (" +
                 FamilyPrefixes() +
                 "; not podnet_probe_* or podnet_peers), without _bucket, _sum or _count "
                 "(docs/metrics.md)");
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

// One entry of peers.static at `path`; std::nullopt when it is not a usable peer (each problem
// reported). `names`: the names so far, each with its first path.
std::optional<StaticPeer> DecodeStaticPeer(Decoder& d, const YAML::Node& p, const std::string& path,
                                           std::map<std::string, std::string>& names) {
  if (!p.IsMap()) {
    d.Fail(p, path, "must be a mapping with name and address");
    return std::nullopt;
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
  if (!ok) return std::nullopt;
  return peer;
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
    auto peer = DecodeStaticPeer(d, p, path, names);
    if (!peer) continue;
    auto [it, fresh] =
        endpoints.emplace(std::pair{peer->address.to_string(), int{peer->port}}, path);
    if (!fresh) {
      d.Fail(p["address"], path + ".address",
             "same address and port as " + it->second + " (one peer would be probed twice)");
      continue;
    }
    c.static_peers.push_back(std::move(*peer));
  }
}

// `kubernetes`: the file has a peers.kubernetes section (valid or not: its own problems are
// reported there, not again by the sections that need it).
void DecodeProbes(Decoder& d, const YAML::Node& n, bool kubernetes, Config& c) {
  static const std::vector<std::string_view> kKeys = [] {
    std::vector<std::string_view> keys;
    for (const auto& s : kProbeSections) keys.push_back(s.key);
    return keys;
  }();
  if (!n.IsDefined() || !d.CheckMap(n, "probes", kKeys)) return;
  const kinds::SectionContext ctx{.kubernetes = kubernetes};
  for (const auto& s : kProbeSections) {
    if (const YAML::Node v = n[std::string(s.key)]; v.IsDefined()) s.decode(d, v, ctx, c);
  }
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
  for (const auto& s : kProbeSections) {
    if (s.on(c)) out.emplace_back(s.key);
  }
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
    discovery.push_back(
        "kubernetes service " + c.kubernetes->namespace_name + "/" + c.kubernetes->service + " (" +
        std::to_string(c.kubernetes->peers_per_zone) + " per zone" +
        (c.kubernetes->discovery == KubernetesPeers::Discovery::kDns
             ? ", from the DNS records of " + c.kubernetes->DnsName()
         : c.kubernetes->discovery == KubernetesPeers::Discovery::kAuto
             ? ", from the DNS records of " + c.kubernetes->DnsName() + " from " +
                   std::to_string(c.kubernetes->auto_dns_from) + " Pods on, else the EndpointSlices"
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
