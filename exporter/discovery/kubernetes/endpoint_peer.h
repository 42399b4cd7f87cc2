#pragma once

#include <cstdint>
#include <vector>

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

/// The probe Pods of the Service (MergeSlices' endpoints, this Pod's own included) as peers of
/// `self`, named after their nodes: a DaemonSet has one probe Pod a node, and a rollout replaces
/// the Pod, not the node, so the `peer` label (and every series of the peer) survives it. Each
/// peer is PeerOf(self, e, port) with burst_port set, `name` = e.node and `pod` = e.name; an
/// endpoint without a nodeName keeps its Pod's name (as `name`, `pod` empty).
/// One peer a name: where two Pods share a node (a rollout with maxSurge, or a second probe
/// Pod on it), this Pod's own endpoint wins on its node (topology::IsSelf finds it), elsewhere
/// MergeSlices' preference (IPv4 first, then the smallest address). Sorted by name.
/// Bursts kept off a node pool: when some endpoint's slice names the burst port
/// (Endpoint::burst_port_named) and a Pod's does not, its peer's burst_port is 0 — a Pod of a
/// DaemonSet without the `burst` container port, which takes no part in coordinated bursts
/// (topology::BurstCandidates).
std::vector<topology::Peer> ProbePeersOf(const topology::Self& self,
                                         const std::vector<Endpoint>& endpoints, std::uint16_t port,
                                         std::uint16_t burst_port);

}  // namespace podnet::discovery::kubernetes
