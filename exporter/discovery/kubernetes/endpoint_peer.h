#pragma once

#include <cstdint>

#include "exporter/discovery/kubernetes/resources.h"
#include "exporter/topology/topology.h"

namespace podnet::discovery::kubernetes {

/// A discovered endpoint (a probe Pod, or a cluster DNS replica) as a peer of `self`, answering
/// on `port`: name, address, node and zone copied, burst_port left at Peer's default (the
/// caller sets peers.kubernetes.burst_port where it applies), path class
/// topology::Classify(self, node, zone). An endpoint whose slice gave no nodeName is `unknown`;
/// one with a node but no zone is same_node on this Pod's node, `unknown` on any other. The
/// address is the one MergeSlices kept (IPv4 first on a dual-stack Service); its family plays
/// no part in the path class.
topology::Peer PeerOf(const topology::Self& self, const Endpoint& e, std::uint16_t port);

}  // namespace podnet::discovery::kubernetes
