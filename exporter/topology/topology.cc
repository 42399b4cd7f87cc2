#include "exporter/topology/topology.h"

#include <algorithm>
#include <map>

namespace podnet::topology {

std::string_view PathClassName(PathClass p) {
  switch (p) {
    case PathClass::kSameNode:
      return "same_node";
    case PathClass::kSameZone:
      return "same_zone";
    case PathClass::kCrossZone:
      return "cross_zone";
    case PathClass::kUnknown:
      break;
  }
  return "unknown";
}

PathClass Classify(const topology::Self& self, std::string_view peer_node,
                   std::string_view peer_zone) {
  if (self.node.empty() || peer_node.empty()) return PathClass::kUnknown;
  if (self.node == peer_node) return PathClass::kSameNode;
  if (self.zone.empty() || peer_zone.empty()) return PathClass::kUnknown;
  return self.zone == peer_zone ? PathClass::kSameZone : PathClass::kCrossZone;
}

bool IsSelf(const Self& self, const Peer& p) {
  return p.name == self.name || (!p.pod.empty() && p.pod == self.name);
}

PeerDiff Diff(const std::vector<Peer>& before, const std::vector<Peer>& after) {
  std::map<std::string, const Peer*> old_by_name;
  for (const auto& p : before) old_by_name[p.name] = &p;
  PeerDiff diff;
  for (const auto& p : after) {
    auto it = old_by_name.find(p.name);
    if (it != old_by_name.end() && *it->second == p) {
      diff.kept.push_back(p);
      old_by_name.erase(it);
    } else {
      diff.added.push_back(p);
    }
  }
  for (const auto& p : before) {
    auto it = old_by_name.find(p.name);
    if (it != old_by_name.end()) diff.removed.push_back(p);
  }
  return diff;
}

}  // namespace podnet::topology
