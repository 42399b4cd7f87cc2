#pragma once

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

/// Picks the peers this Pod probes from every discovered candidate (issue 6):
///  - every same_node candidate;
///  - in each zone, own zone included, the `peers_per_zone` other-node candidates with the
///    highest RendezvousWeight(SelectionKey(self), SelectionKey(candidate)); candidates whose
///    zone is unknown ("") form one more group with the same bound.
/// So each Pod probes at most peers_per_zone × (zones + 1) + same-node peers, the choice stays
/// the same across restarts, a membership change moves only the peers it must (a new candidate
/// displaces at most one peer per Pod in its zone), and every candidate is picked by about
/// peers_per_zone × (Pods) / (candidates in its zone) Pods — the in-degree spreads evenly.
/// `candidates` must already be classified (Peer::path) and must not contain self; order does
/// not matter. Returns the chosen peers sorted by name. peers_per_zone < 1
/// is treated as 1.
std::vector<Peer> SelectPeers(const topology::Self& self, const std::vector<Peer>& candidates,
                              int peers_per_zone);

/// At most `max` of `servers` (classified cluster DNS replicas, or any peers), spread over
/// zones: the zones take turns, each giving its next server, so that a cap below the replica
/// count still keeps as many zones represented as it can. Turn order: this Pod's own zone
/// first (the zone of a same_node or same_zone server), then the other zones by name, servers
/// of unknown zone ("") last; within a zone, same_node servers first, then by name. The result
/// is sorted by name; `servers.size()` minus its size were left out.
std::vector<Peer> SpreadOverZones(std::vector<Peer> servers, std::size_t max);

}  // namespace podnet::topology
