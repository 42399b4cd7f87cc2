#pragma once

#include <cstddef>
#include <vector>

#include "exporter/topology/topology.h"

namespace podnet::topology {

/// How ComposePeers chooses among discovered candidates.
struct SelectionOptions {
  /// SelectPeers' bound per zone (peers.kubernetes.peers_per_zone); below 1 counts as 1.
  int peers_per_zone = 3;
};

/// The peers this Pod probes, and the counts its log line gives.
struct Composition {
  /// Sorted by name, never self; each peer's path class is Classify(self, ·).
  std::vector<Peer> peers;
  /// Discovered candidates other than self (the Service lists this Pod too).
  std::size_t candidates = 0;
  /// Of those candidates, how many are in `peers`: selected and not shadowed by a static peer.
  std::size_t selected = 0;
};

/// The topology step (config → discovery → topology → scheduler): from where peers come from to
/// the list the scheduler runs. Pure: the same inputs give the same Composition.
///  - `self` is the effective self (the configuration's, with the zone read from the Node when
///    the configuration has none); every peer is classified against it here, whatever `path`
///    it came with.
///  - A peer that IsSelf is left out of both lists: a Pod never probes itself.
///  - `static_peers` (peers.static) are all kept: they are chosen by hand, not selected.
///  - `discovered` (the Kubernetes candidates, one per node: discovery::kubernetes::ProbePeersOf
///    names them after their nodes, IPv4 preferred on a dual-stack Service) go through
///    SelectPeers(·, ·, options.peers_per_zone), with self's node and zone from its own record
///    in `discovered` (no duties while it is not listed): every same_node candidate, at most
///    peers_per_zone of the others per zone, candidates of unknown zone one more group. Addresses
///    play no part.
///  - A static peer wins over a selected candidate of the same name (the static entry is
///    kept). The candidate still took its place in its zone's selection: a shadowed candidate
///    does not let another one in.
/// Names are unique within each list (the configuration rejects a duplicate static name), so
/// they are unique in `peers`. Discovery that has not listed yet (or no peers.kubernetes) is an
/// empty `discovered`: the static peers alone, counts 0.
Composition ComposePeers(const Self& self, const std::vector<Peer>& static_peers,
                         const std::vector<Peer>& discovered, const SelectionOptions& options);

}  // namespace podnet::topology
