// probes.service: its section of the configuration (the keys: docs/configuration.md).
#include "exporter/config/kinds/service.h"

#include <cctype>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "exporter/config/decoder.h"
#include "exporter/config/names.h"

namespace podnet::config::kinds::service {

const char* ServiceProtocolName(ServiceProtocol p) {
  return p == ServiceProtocol::kUdp ? "udp" : "http";
}

namespace {

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
                         std::map<std::string, std::string>& names, ServiceOptions& o) {
  if (!t.IsMap()) {
    d.Fail(t, path, "must be a mapping with name, address, port and protocol");
    return;
  }
  d.CheckMap(t, path, {"name", "address", "port", "protocol", "kubernetes_service"});
  ServiceTarget target;
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

}  // namespace

void Decode(Decoder& d, const YAML::Node& n, const SectionContext& ctx, Config& c) {
  const std::string base = "probes.service";
  if (!d.CheckMap(n, base, {"interval", "count", "spacing", "timeout", "targets"})) return;
  ServiceOptions o;
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

}  // namespace podnet::config::kinds::service
