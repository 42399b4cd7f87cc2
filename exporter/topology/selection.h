#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "exporter/topology/topology.h"

namespace podnet::topology {

/// Rendezvous (highest-random-weight) weight of the pair (self, peer): a 64-bit FNV-1a hash of
/// both keys, length-prefixed so that ("ab","c") and ("a","bc") differ, then splitmix64's
/// finalizer so that every output bit depends on every input bit (Thaler & Ravishankar, "Using
/// Name-Based Mappings to Increase Hit Rates", 1998). The same inputs give the same weight on
/// every platform, process and restart — std::hash promises none of that.
std::uint64_t RendezvousWeight(std::string_view self_key, std::string_view peer_key);

/// The key a Pod is hashed under: its node name when known (a DaemonSet runs one probe Pod per
/// node, and node names survive a rollout that renames every Pod), its Pod name otherwise.
std::string_view SelectionKey(std::string_view name, std::string_view node);

/// How many probers SelectPeers gives every node, from all zones together, when the cluster
/// holds them: the fault rules' fault_min_probers default (deploy/prometheus), below which
/// PodnetPeerNodeFault cannot name a node.
inline constexpr std::size_t kGuaranteedProbers = 3;

/// Picks the peers this Pod probes from every discovered candidate (issue 6), per zone, own zone
/// included (candidates whose zone is unknown, "", form one more zone):
///  - every same_node candidate;
///  - its duties: the zone's nodes a bounded-load consistent-hash ring gives it. Nodes and
///    probers are placed by RendezvousWeight("podnet duty ring", SelectionKey); each node of
///    zone T, in ring order, goes to the first R probe nodes of this Pod's zone Z at or after it
///    that are not itself and hold fewer than C nodes (Mirrokni, Thorup & Zadimoghaddam, SODA
///    2018). R, per (Z, T): each zone can give a node of T at most min(|Z| − [Z = T],
///    ⌊|Z| × peers_per_zone / |T|⌋) probers; the zones that can give any give ceil(3 / their
///    count) each, within that, and what a zone cannot give goes to the others with room, in
///    zone-name order. C = max(R, ceil(1.25 × R × |T| / |Z|)), at most peers_per_zone. Every
///    Pod computes the same assignment from the same candidates, so every node gets
///    kGuaranteedProbers from all zones together wherever the zones' sizes and
///    peers_per_zone allow it (equal zones: ceil(3 / zones) from each), deterministically,
///    instead of by chance;
///  - the rest of peers_per_zone: the zone's other-node candidates with the highest
///    RendezvousWeight(SelectionKey(self), SelectionKey(candidate)).
/// `self` is this Pod as the other Pods see it: its own discovered record's node and zone
/// (ComposePeers takes them from there), or the rings would differ between Pods.
/// `self_listed` false (this Pod is not among the discovered candidates, so no other Pod counts
/// it as a prober): no duties, only the rendezvous picks.
/// So each Pod probes peers_per_zone × (zones + 1) + same-node peers at most (a node that runs
/// two probe Pods counts as one duty), the choice stays the same across restarts, a membership
/// change moves few peers (the new node, and the duties a full prober passes on along the
/// ring), and the in-degree spreads evenly. `candidates` must already be classified
/// (Peer::path) and must not contain self; order does not matter. Returns the chosen peers
/// sorted by name. peers_per_zone < 1 is treated as 1. O(n log n) in the candidates while
/// probers have room; a zone whose probers fill up stops there (a walk may still pass full
/// probers: O(n × probers) at worst, tens of ms at 10,000 nodes in lopsided zones).
std::vector<Peer> SelectPeers(const topology::Self& self, const std::vector<Peer>& candidates,
                              int peers_per_zone, bool self_listed = true);

/// At most `max` of `servers` (classified cluster DNS replicas, or any peers), spread over
/// zones: the zones take turns, each giving its next server, so that a cap below the replica
/// count still keeps as many zones represented as it can. Turn order: this Pod's own zone
/// first (the zone of a same_node or same_zone server), then the other zones by name, servers
/// of unknown zone ("") last; within a zone, same_node servers first, then by name. The result
/// is sorted by name; `servers.size()` minus its size were left out.
std::vector<Peer> SpreadOverZones(std::vector<Peer> servers, std::size_t max);

}  // namespace podnet::topology
