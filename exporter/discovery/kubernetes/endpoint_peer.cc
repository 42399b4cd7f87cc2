#include "exporter/discovery/kubernetes/endpoint_peer.h"

#include <algorithm>
#include <map>
#include <string>

namespace podnet::discovery::kubernetes {

topology::Peer PeerOf(const topology::Self& self, const Endpoint& e, std::uint16_t port) {
  topology::Peer p;
  p.name = e.name;
  p.address = e.address;
  p.port = port;
  p.node = e.node;
  p.zone = e.zone;
  p.path = topology::Classify(self, e.node, e.zone);
  return p;
}

std::vector<topology::Peer> ProbePeersOf(const topology::Self& self,
                                         const std::vector<Endpoint>& endpoints, std::uint16_t port,
                                         std::uint16_t burst_port) {
  std::map<std::string, const Endpoint*> by_name;  // sorted by name, as Diff wants the list
  auto is_self = [&](const Endpoint* e) { return e->name == self.name; };
  for (const Endpoint& e : endpoints) {
    auto [it, inserted] = by_name.emplace(e.node.empty() ? e.name : e.node, &e);
    if (inserted || is_self(it->second)) continue;
    if (is_self(&e) || PreferredEndpoint(e, *it->second)) it->second = &e;
  }
  const bool burst_port_in_service =
      std::any_of(endpoints.begin(), endpoints.end(),
                  [](const Endpoint& e) { return e.burst_port_named.value_or(false); });
  std::vector<topology::Peer> out;
  out.reserve(by_name.size());
  for (const auto& [name, e] : by_name) {
    out.push_back(PeerOf(self, *e, port));
    bool no_bursts = burst_port_in_service && !e->burst_port_named.value_or(true);
    out.back().burst_port = no_bursts ? 0 : burst_port;
    if (!e->node.empty()) {
      out.back().name = name;
      out.back().pod = e->name;
    }
  }
  return out;
}

}  // namespace podnet::discovery::kubernetes
