#include "exporter/topology/selection.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

namespace podnet::topology {

namespace {

constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

std::uint64_t FnvAdd(std::uint64_t h, std::string_view s) {
  // Length first: keys are variable length, and ("ab","c") must not hash like ("a","bc").
  std::uint64_t n = s.size();
  for (int i = 0; i < 8; ++i) {
    h ^= (n >> (8 * i)) & 0xff;
    h *= kFnvPrime;
  }
  for (unsigned char c : s) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

// splitmix64's output function (Steele, Lea & Flood, "Fast Splittable Pseudorandom Number
// Generators", OOPSLA 2014): FNV alone leaves the high bits weakly mixed for short keys.
std::uint64_t Mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

std::uint64_t RendezvousWeight(std::string_view self_key, std::string_view peer_key) {
  return Mix(FnvAdd(FnvAdd(kFnvOffset, self_key), peer_key));
}

std::string_view SelectionKey(std::string_view name, std::string_view node) {
  return node.empty() ? name : node;
}

std::vector<Peer> SelectPeers(const topology::Self& self, const std::vector<Peer>& candidates,
                              int peers_per_zone) {
  const std::size_t per_zone = static_cast<std::size_t>(std::max(peers_per_zone, 1));
  const std::string_view self_key = SelectionKey(self.name, self.node);
  std::vector<Peer> chosen;
  // zone → (weight, name, index) of its other-node candidates.
  std::map<std::string, std::vector<std::tuple<std::uint64_t, std::string_view, std::size_t>>,
           std::less<>>
      zones;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Peer& p = candidates[i];
    if (p.path == PathClass::kSameNode) {
      chosen.push_back(p);
      continue;
    }
    zones[p.zone].emplace_back(RendezvousWeight(self_key, SelectionKey(p.name, p.node)), p.name, i);
  }
  for (auto& [zone, group] : zones) {
    std::size_t k = std::min(per_zone, group.size());
    // Highest weight first; the name breaks (astronomically rare) ties so the order is total.
    std::partial_sort(group.begin(), group.begin() + static_cast<std::ptrdiff_t>(k), group.end(),
                      [](const auto& a, const auto& b) {
                        return std::tie(std::get<0>(b), std::get<1>(a)) <
                               std::tie(std::get<0>(a), std::get<1>(b));
                      });
    for (std::size_t j = 0; j < k; ++j) chosen.push_back(candidates[std::get<2>(group[j])]);
  }
  std::sort(chosen.begin(), chosen.end(),
            [](const Peer& a, const Peer& b) { return a.name < b.name; });
  return chosen;
}

std::vector<Peer> SpreadOverZones(std::vector<Peer> servers, std::size_t max) {
  if (servers.size() <= max) {
    std::sort(servers.begin(), servers.end(),
              [](const Peer& a, const Peer& b) { return a.name < b.name; });
    return servers;
  }
  // (turn rank, zone) → its servers, best first: 0 own zone, 1 another zone, 2 unknown zone.
  std::map<std::pair<int, std::string>, std::vector<const Peer*>> zones;
  for (const Peer& p : servers) {
    bool own = p.path == PathClass::kSameNode || p.path == PathClass::kSameZone;
    int rank = own ? 0 : (p.zone.empty() ? 2 : 1);
    zones[{rank, p.zone}].push_back(&p);
  }
  for (auto& [zone, list] : zones) {
    std::sort(list.begin(), list.end(), [](const Peer* a, const Peer* b) {
      return std::make_tuple(a->path != PathClass::kSameNode, a->name) <
             std::make_tuple(b->path != PathClass::kSameNode, b->name);
    });
  }
  std::vector<Peer> chosen;
  for (std::size_t turn = 0; chosen.size() < max; ++turn) {
    bool any = false;
    for (auto& [zone, list] : zones) {
      if (turn >= list.size() || chosen.size() == max) continue;
      chosen.push_back(*list[turn]);
      any = true;
    }
    if (!any) break;
  }
  std::sort(chosen.begin(), chosen.end(),
            [](const Peer& a, const Peer& b) { return a.name < b.name; });
  return chosen;
}

}  // namespace podnet::topology
