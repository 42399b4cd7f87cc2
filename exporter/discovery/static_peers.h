#pragma once

#include <vector>

#include "exporter/config/config.h"
#include "exporter/topology/topology.h"

namespace podnet::discovery {

/// Peers from the configuration's peers.static list, classified against self (the only source
/// of peers until Kubernetes discovery lands). Pure: the same config gives the same list.
std::vector<topology::Peer> StaticPeers(const config::Config& config);

}  // namespace podnet::discovery
