#include "exporter/discovery/kubernetes/endpoint_peer.h"

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

}  // namespace podnet::discovery::kubernetes
