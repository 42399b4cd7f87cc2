#include "exporter/discovery/static_peers.h"

namespace podnet::discovery {

std::vector<topology::Peer> StaticPeers(const config::Self& self, const config::Config& config) {
  return topology::BuildPeers(self, config.static_peers);
}

}  // namespace podnet::discovery
