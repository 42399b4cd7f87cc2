#pragma once

#include <vector>

#include "exporter/config/config.h"
#include "exporter/topology/topology.h"

namespace podnet::discovery {

/// Peers from the configuration's peers.static list, classified against `self` (the effective
/// self: the configuration's, with the zone read from the Node when the configuration has
/// none), sorted by name. The prober never probes itself: a peer whose name equals self.name is
/// left out (the DaemonSet's Service lists this Pod too). Pure: the same inputs give the same
/// list. Kubernetes peers come from discovery/kubernetes/ and are added to these by the App.
std::vector<topology::Peer> StaticPeers(const topology::Self& self,
                                        const std::vector<config::StaticPeer>& static_peers);

}  // namespace podnet::discovery
