#include "exporter/discovery/static_peers.h"

#include <algorithm>

namespace podnet::discovery {

std::vector<topology::Peer> StaticPeers(const topology::Self& self,
                                        const std::vector<config::StaticPeer>& static_peers) {
  std::vector<topology::Peer> peers;
  for (const auto& sp : static_peers) {
    if (sp.name == self.name) continue;
    topology::Peer p;
    p.name = sp.name;
    p.address = sp.address;
    p.port = sp.port;
    p.burst_port = sp.burst_port;
    p.node = sp.node;
    p.zone = sp.zone;
    p.path = topology::Classify(self, sp.node, sp.zone);
    peers.push_back(std::move(p));
  }
  std::sort(peers.begin(), peers.end(),
            [](const topology::Peer& a, const topology::Peer& b) { return a.name < b.name; });
  return peers;
}

}  // namespace podnet::discovery
