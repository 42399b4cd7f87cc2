#include "exporter/topology/selection.h"

#include <algorithm>
#include <cmath>
#include <iterator>
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

namespace {

// A member of the duty ring: its position and key (SelectionKey), and for a target the indexes
// of the candidates under that key (one, unless a node runs two probe Pods, as in a rollout).
struct RingMember {
  std::uint64_t position;
  std::string_view key;
  std::vector<std::size_t> candidates;
};

std::uint64_t RingPosition(std::string_view key) {
  return RendezvousWeight("podnet duty ring", key);
}

// Ring order, one member per key (`members` may repeat a key: its candidates are merged).
void RingSort(std::vector<RingMember>& members) {
  std::sort(members.begin(), members.end(), [](const RingMember& a, const RingMember& b) {
    return std::tie(a.position, a.key) < std::tie(b.position, b.key);
  });
  std::vector<RingMember> out;
  for (auto& m : members) {
    if (!out.empty() && out.back().key == m.key) {
      out.back().candidates.insert(out.back().candidates.end(), m.candidates.begin(),
                                   m.candidates.end());
    } else {
      out.push_back(std::move(m));
    }
  }
  members = std::move(out);
}

using Rings = std::map<std::string, std::vector<RingMember>, std::less<>>;

// How many probe nodes of zone `from` each node of zone `to` gets as a duty. Each zone Z can give
// a node of `to` at most min(|Z| − [Z = to], ⌊|Z| × per_zone / |to|⌋) distinct probers (enough
// probers other than the node itself, and enough peers_per_zone slots to cover all of `to`); a
// zone that cannot cover `to` once gives none. The zones that can each give ceil(G / their
// count), G = kGuaranteedProbers, within what they can; a shortfall goes, one prober at a time,
// to the zones with room, in name order. So every node gets G where the zones together can give
// it, and equal zones give ceil(G / zones) each. Same answer in every Pod that sees the same
// zones.
std::size_t Replicas(const Rings& rings, std::string_view from, std::string_view to,
                     std::size_t per_zone) {
  const std::size_t to_size = rings.find(to)->second.size();
  std::vector<std::size_t> room;  // per zone, in name order
  std::size_t givers = 0;
  for (const auto& [zone, ring] : rings) {
    const std::size_t probers = ring.size() - (zone == to ? 1 : 0);
    room.push_back(std::min(probers, ring.size() * per_zone / to_size));
    givers += room.back() > 0 ? 1 : 0;
  }
  if (givers == 0) return 0;
  const std::size_t even = (kGuaranteedProbers + givers - 1) / givers;
  std::vector<std::size_t> given(room.size());
  std::size_t total = 0;
  for (std::size_t z = 0; z < room.size(); ++z) {
    given[z] = std::min(even, room[z]);
    total += given[z];
  }
  for (bool more = true; more && total < kGuaranteedProbers;) {
    more = false;
    for (std::size_t z = 0; z < room.size() && total < kGuaranteedProbers; ++z) {
      if (given[z] < room[z]) {
        ++given[z];
        ++total;
        more = true;
      }
    }
  }
  return given[static_cast<std::size_t>(std::distance(rings.begin(), rings.find(from)))];
}

// Consistent hashing with bounded loads (Mirrokni, Thorup & Zadimoghaddam, "Consistent Hashing
// with Bounded Loads", SODA 2018): each target, in ring order, goes to the first `replicas`
// probers at or after its position that are not itself and hold fewer than `cap` targets. Every
// Pod computes the same assignment from the same membership; this returns the targets assigned
// to `self_key` (indexes into `targets`), in ring order.
std::vector<std::size_t> Duty(std::string_view self_key, const std::vector<RingMember>& probers,
                              const std::vector<RingMember>& targets, std::size_t replicas,
                              std::size_t cap) {
  std::vector<std::size_t> duty;
  std::vector<std::size_t> load(probers.size(), 0);
  const std::size_t n = probers.size();
  std::size_t open = cap > 0 ? n : 0;  // probers below the cap: once none is, nothing is left
  for (const auto& t : targets) {
    if (open == 0) break;
    auto first = std::lower_bound(
        probers.begin(), probers.end(), t.position,
        [](const RingMember& p, std::uint64_t position) { return p.position < position; });
    std::size_t start = static_cast<std::size_t>(first - probers.begin());
    std::size_t taken = 0;
    for (std::size_t step = 0; step < n && taken < replicas && open > 0; ++step) {
      std::size_t i = (start + step) % n;
      if (load[i] >= cap || probers[i].key == t.key) continue;
      if (++load[i] == cap) --open;
      ++taken;
      if (probers[i].key == self_key) {
        duty.push_back(static_cast<std::size_t>(&t - targets.data()));
      }
    }
  }
  return duty;
}

}  // namespace

namespace {

// The candidates of the nodes this prober has the duty to probe in `zone` (a node's Pods
// together), sorted; *duty_nodes: how many nodes. `own`: the ring of this prober's zone.
std::vector<std::size_t> DutyCandidates(const Rings& rings, const std::vector<RingMember>& own,
                                        std::string_view self_key, std::string_view self_zone,
                                        const std::string& zone, std::size_t per_zone,
                                        std::size_t* duty_nodes) {
  std::vector<std::size_t> duty;
  const std::vector<RingMember>& targets = rings.find(zone)->second;
  const std::size_t replicas = Replicas(rings, self_zone, zone, per_zone);
  // A prober's load bound: 1.25 × its fair share of the replicas, never above peers_per_zone.
  const double share = static_cast<double>(replicas) * static_cast<double>(targets.size()) /
                       static_cast<double>(own.size());
  const std::size_t cap =
      std::min(per_zone, std::max(replicas, static_cast<std::size_t>(std::ceil(1.25 * share))));
  for (std::size_t t : Duty(self_key, own, targets, replicas, cap)) {
    duty.insert(duty.end(), targets[t].candidates.begin(), targets[t].candidates.end());
    ++*duty_nodes;
  }
  std::sort(duty.begin(), duty.end());
  return duty;
}

}  // namespace

std::vector<Peer> SelectPeers(const topology::Self& self, const std::vector<Peer>& candidates,
                              int peers_per_zone, bool self_listed) {
  const std::size_t per_zone = static_cast<std::size_t>(std::max(peers_per_zone, 1));
  const std::string_view self_key = SelectionKey(self.name, self.node);
  std::vector<Peer> chosen;
  // zone → (weight, name, index) of its other-node candidates, and its ring of node keys.
  std::map<std::string, std::vector<std::tuple<std::uint64_t, std::string_view, std::size_t>>,
           std::less<>>
      zones;
  Rings rings;
  if (self_listed) rings[self.zone].push_back({RingPosition(self_key), self_key, {}});
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Peer& p = candidates[i];
    if (p.path == PathClass::kSameNode) {
      chosen.push_back(p);
      continue;
    }
    const std::string_view key = SelectionKey(p.name, p.node);
    zones[p.zone].emplace_back(RendezvousWeight(self_key, key), p.name, i);
    rings[p.zone].push_back({RingPosition(key), key, {i}});
  }
  for (auto& [zone, ring] : rings) RingSort(ring);
  const auto own = rings.find(self.zone);
  for (auto& [zone, group] : zones) {
    std::size_t duty_nodes = 0;
    std::vector<std::size_t> duty =
        self_listed
            ? DutyCandidates(rings, own->second, self_key, self.zone, zone, per_zone, &duty_nodes)
            : std::vector<std::size_t>{};
    for (std::size_t i : duty) chosen.push_back(candidates[i]);
    // The rest of peers_per_zone: highest weight first, the name breaking (astronomically rare)
    // ties so that the order is total.
    const std::size_t ranked = std::min(group.size(), per_zone + duty.size());
    std::partial_sort(group.begin(), group.begin() + static_cast<std::ptrdiff_t>(ranked),
                      group.end(), [](const auto& a, const auto& b) {
                        return std::tie(std::get<0>(b), std::get<1>(a)) <
                               std::tie(std::get<0>(a), std::get<1>(b));
                      });
    group.resize(ranked);
    std::size_t taken = std::min(duty_nodes, per_zone);
    for (const auto& g : group) {
      if (taken >= per_zone) break;
      if (std::binary_search(duty.begin(), duty.end(), std::get<2>(g))) continue;
      chosen.push_back(candidates[std::get<2>(g)]);
      ++taken;
    }
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
