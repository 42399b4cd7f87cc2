#pragma once

#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace podnet::topology {

/// Who this probe Pod is. `node` is required; `zone` may be empty (path class `unknown` for
/// peers that cannot be compared).
struct Self {
  std::string name;
  std::string node;
  std::string zone;

  bool operator==(const Self&) const = default;
};

/// Where a peer sits relative to this probe Pod — the rung of the latency ladder.
enum class PathClass { kSameNode, kSameZone, kCrossZone, kUnknown };

/// The label value: "same_node" | "same_zone" | "cross_zone" | "unknown".
std::string_view PathClassName(PathClass p);

/// All path classes, in ladder order (for podnet_peers{path_class}, which reports zeros too).
inline constexpr PathClass kAllPathClasses[] = {PathClass::kSameNode, PathClass::kSameZone,
                                                PathClass::kCrossZone, PathClass::kUnknown};

/// Classifies a peer: same node name → same_node; else both zones known and equal → same_zone;
/// both known and different → cross_zone. An empty node on either side, or an empty zone where
/// the nodes differ, gives unknown: a guess would put a series on the wrong rung.
PathClass Classify(const topology::Self& self, std::string_view peer_node,
                   std::string_view peer_zone);

/// A peer this Pod probes, with its path class. Two peers are the same peer only if every field
/// is equal: a peer whose address or zone changes is a new peer (old series go, new ones come).
/// `name` is the `peer` label's value: a static peer's configured name; a discovered probe Pod's
/// node name (discovery::kubernetes::ProbePeersOf: stable across a DaemonSet's rollouts), with
/// the Pod's own name in `pod`; a cluster DNS replica's Pod name.
struct Peer {
  std::string name;
  boost::asio::ip::address address;
  std::uint16_t port = 9479;
  std::uint16_t burst_port = 5201;
  std::string node;
  std::string zone;
  PathClass path = PathClass::kUnknown;
  std::string pod;  // the Pod behind a discovered probe peer named after its node; else ""

  bool operator==(const Peer&) const = default;
};

/// Whether `p` is this probe Pod itself: its name is self.name (a static entry, or a discovered
/// Pod without a node), or its Pod is (a discovered probe Pod, named after its node). A Pod
/// never probes itself; coordinated bursts find their own place in the candidates by it.
bool IsSelf(const Self& self, const Peer& p);

/// What changed between two peer lists (each sorted by name, as discovery gives them).
struct PeerDiff {
  std::vector<Peer> added;
  std::vector<Peer> removed;
  std::vector<Peer> kept;
};
PeerDiff Diff(const std::vector<Peer>& before, const std::vector<Peer>& after);

}  // namespace podnet::topology
