// probes.dns: its section of the configuration (the keys: docs/configuration.md).
#include "exporter/config/kinds/dns.h"

#include <algorithm>

#include "exporter/config/decoder.h"
#include "exporter/config/names.h"

namespace podnet::config::kinds::dns {

const char* LibcName(Libc l) { return l == Libc::kGlibc ? "glibc" : "musl"; }

std::optional<Libc> ParseLibc(std::string_view s) {
  if (s == "glibc") return Libc::kGlibc;
  if (s == "musl") return Libc::kMusl;
  return std::nullopt;
}

namespace {

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
void DecodeClusterDns(Decoder& d, const YAML::Node& n, bool kubernetes, DnsOptions& o) {
  const std::string base = "probes.dns.cluster_dns";
  if (!SectionOn(d, n, base, {"namespace", "service", "port", "max_servers"}, o.cluster_dns)) {
    return;
  }
  ClusterDnsOptions& cd = *o.cluster_dns;
  if (n.IsMap()) {
    for (auto [key, out] : {std::pair<const char*, std::string*>{"namespace", &cd.namespace_name},
                            std::pair<const char*, std::string*>{"service", &cd.service}}) {
      const YAML::Node v = n[key];
      if (!v.IsDefined()) continue;
      auto s = d.String(v, base + "." + key);
      if (s && !ValidKubernetesName(*s)) {
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
void DecodeDnsSample(Decoder& d, const YAML::Node& n, bool kubernetes, DnsOptions& o) {
  const std::string base = "probes.dns.sample";
  if (!SectionOn(d, n, base, {"pods_per_zone", "replica_pods_per_zone", "period"}, o.sample)) {
    return;
  }
  DnsSampleOptions& sample = *o.sample;
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

// probes.dns.resolvers: a non-empty list of glibc, musl, each once.
void DecodeResolvers(Decoder& d, const YAML::Node& v, const std::string& base, DnsOptions& o) {
  o.resolvers.clear();
  if (!v.IsSequence() || v.size() == 0) {
    d.Fail(v, base + ".resolvers", "must be a non-empty list of glibc, musl");
    return;
  }
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::string path = base + ".resolvers[" + std::to_string(i) + "]";
    auto s = d.String(v[i], path);
    if (!s) continue;
    auto libc = ParseLibc(*s);
    if (!libc) {
      d.Fail(v[i], path, "must be \"glibc\" or \"musl\", got " + Quote(*s));
    } else if (std::find(o.resolvers.begin(), o.resolvers.end(), *libc) != o.resolvers.end()) {
      d.Fail(v[i], path, "duplicate resolver " + Quote(*s));
    } else {
      o.resolvers.push_back(*libc);
    }
  }
}

// probes.dns.names (required): a non-empty list of DNS names, each once; `n` is the section.
void DecodeNames(Decoder& d, const YAML::Node& n, const std::string& base, DnsOptions& o) {
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
}

}  // namespace

void Decode(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c) {
  const bool kubernetes = ctx.kubernetes;
  const std::string base = "probes.dns";
  if (!d.CheckMap(n, base,
                  {"interval", "resolv_conf", "resolvers", "names", "cluster_dns", "sample"})) {
    return;
  }
  DnsOptions o;
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
  if (const YAML::Node v = n["resolvers"]; v.IsDefined()) DecodeResolvers(d, v, base, o);
  DecodeNames(d, n, base, o);
  c.dns = o;
}

}  // namespace podnet::config::kinds::dns
