#include "exporter/topology/selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/unit/testing/peers.h"

namespace podnet::topology {
namespace {

// A simulated cluster: `nodes` nodes spread round-robin over `zones` zones, one probe Pod per
// node (a DaemonSet), Pod IPs from 10.0.0.0/8.
struct Cluster {
  std::vector<topology::Self> pods;
};

Cluster MakeCluster(int nodes, int zones) {
  Cluster c;
  for (int i = 0; i < nodes; ++i) {
    c.pods.push_back({"podnet-" + std::to_string(i * 7919 % 100000), "node-" + std::to_string(i),
                      "zone-" + std::string(1, static_cast<char>('a' + i % zones))});
  }
  return c;
}

Peer AsPeer(const topology::Self& self, const topology::Self& pod, int index) {
  Peer p;
  p.name = pod.name;
  p.node = pod.node;
  p.zone = pod.zone;
  p.address = boost::asio::ip::address_v4(0x0a000000u + static_cast<unsigned>(index) + 1);
  p.path = Classify(self, p.node, p.zone);
  return p;
}

std::vector<Peer> Candidates(const Cluster& c, const topology::Self& self) {
  std::vector<Peer> out;
  for (std::size_t i = 0; i < c.pods.size(); ++i) {
    if (c.pods[i].name == self.name) continue;
    out.push_back(AsPeer(self, c.pods[i], static_cast<int>(i)));
  }
  return out;
}

std::set<std::string> NameSet(const std::vector<Peer>& peers) {
  std::set<std::string> s;
  for (const auto& p : peers) s.insert(p.name);
  return s;
}

constexpr int kNodes = 1000;
constexpr int kZones = 5;
constexpr int kPerZone = 3;

TEST(SelectionTest, WeightDependsOnBothKeysAndTheirBoundary) {
  EXPECT_EQ(RendezvousWeight("node-1", "node-2"), RendezvousWeight("node-1", "node-2"));
  EXPECT_NE(RendezvousWeight("node-1", "node-2"), RendezvousWeight("node-2", "node-1"));
  EXPECT_NE(RendezvousWeight("ab", "c"), RendezvousWeight("a", "bc"));
  EXPECT_EQ(SelectionKey("pod-x", "node-3"), "node-3");
  EXPECT_EQ(SelectionKey("pod-x", ""), "pod-x");
}

TEST(SelectionTest, WeightsLookUniform) {
  // Top bit and low bits of 20,000 weights: each half within 2 % of 50 % (σ ≈ 0.35 %).
  int top = 0, low = 0;
  constexpr int kN = 20000;
  for (int i = 0; i < kN; ++i) {
    std::uint64_t w = RendezvousWeight("node-7", "node-" + std::to_string(i));
    top += static_cast<int>(w >> 63);
    low += static_cast<int>(w & 1);
  }
  EXPECT_NEAR(top, kN / 2, kN / 50);
  EXPECT_NEAR(low, kN / 2, kN / 50);
}

TEST(SelectionTest, ThousandNodesBoundedCoveredStableAndEven) {
  Cluster c = MakeCluster(kNodes, kZones);
  // Two more probe Pods on node-0 (e.g. a second DaemonSet revision during a rollout):
  // same-node peers are always probed, whatever the bound.
  c.pods.push_back({"podnet-extra-1", "node-0", "zone-a"});
  c.pods.push_back({"podnet-extra-2", "node-0", "zone-a"});
  std::map<std::string, int> in_degree;
  std::mt19937 rng(42);
  for (const auto& self : c.pods) {
    auto candidates = Candidates(c, self);
    auto chosen = SelectPeers(self, candidates, kPerZone);

    // Bounded: at most peers_per_zone nodes per zone, plus the same-node peers.
    std::map<std::string, int> per_zone;
    std::map<std::string, std::set<std::string>> nodes_per_zone;
    int same_node = 0;
    for (const auto& p : chosen) {
      if (p.path == PathClass::kSameNode) {
        ++same_node;
      } else {
        ++per_zone[p.zone];
        nodes_per_zone[p.zone].insert(p.node);
      }
      ++in_degree[p.name];
      EXPECT_NE(p.name, self.name);
    }
    int want_same_node = 0;
    for (const auto& p : candidates) want_same_node += p.path == PathClass::kSameNode;
    EXPECT_EQ(same_node, want_same_node) << self.name;
    // Covered: every zone, own zone included, gets peers_per_zone other-node peers; node-0's
    // three Pods are one node (a duty takes them all, the weights rank them side by side).
    ASSERT_EQ(per_zone.size(), static_cast<std::size_t>(kZones)) << self.name;
    for (const auto& [zone, n] : per_zone) {
      EXPECT_GE(n, kPerZone) << self.name << " " << zone;
      EXPECT_LE(nodes_per_zone[zone].size(), static_cast<std::size_t>(kPerZone)) << zone;
      EXPECT_LE(n - static_cast<int>(nodes_per_zone[zone].size()), 2) << self.name << " " << zone;
    }

    // Stable: the candidates' order does not matter, and a second run (a restart) agrees.
    std::shuffle(candidates.begin(), candidates.end(), rng);
    EXPECT_EQ(SelectPeers(self, candidates, kPerZone), chosen) << self.name;
    EXPECT_TRUE(std::is_sorted(chosen.begin(), chosen.end(),
                               [](const Peer& a, const Peer& b) { return a.name < b.name; }));
  }
  // Even: every Pod is probed by someone, and nobody by more than twice the mean.
  std::size_t total = 0;
  int max_in = 0;
  for (const auto& [name, d] : in_degree) {
    total += static_cast<std::size_t>(d);
    max_in = std::max(max_in, d);
  }
  double mean = static_cast<double>(total) / static_cast<double>(c.pods.size());
  EXPECT_EQ(in_degree.size(), c.pods.size()) << "some Pod is probed by nobody";
  EXPECT_LE(max_in, 2 * mean) << "max in-degree " << max_in << ", mean " << mean;
}

// Every node's probers, by the prober's zone, when every Pod of `c` selects with `per_zone`.
std::map<std::string, std::map<std::string, int>> ProbersByZone(const Cluster& c, int per_zone) {
  std::map<std::string, std::map<std::string, int>> probers;
  for (const auto& self : c.pods) {
    probers[self.node];  // a node nobody probes is listed, with no zone
    for (const auto& p : SelectPeers(self, Candidates(c, self), per_zone)) {
      ++probers[p.node][self.zone];
    }
  }
  return probers;
}

TEST(SelectionTest, EveryNodeGetsTheGuaranteedProbersFromEveryZone) {
  // Random weights alone leave some nodes under 3 probers (Poisson with mean k × zones: 0.6 %
  // at k = 3 in 3 zones); the duties leave none, at the same peers per Pod. R = ceil(3 / zones)
  // probers of each zone: 1 in 3 zones, 2 in 2, 3 in 1.
  for (int zones : {1, 2, 3}) {
    for (int per_zone : {1, 3}) {
      const Cluster c = MakeCluster(600, zones);
      const int replicas = std::min(per_zone, (3 + zones - 1) / zones);
      for (const auto& [node, by_zone] : ProbersByZone(c, per_zone)) {
        ASSERT_EQ(by_zone.size(), static_cast<std::size_t>(zones)) << node;
        for (const auto& [zone, n] : by_zone) {
          EXPECT_GE(n, replicas) << node << " from " << zone << ", " << zones << " zones, k "
                                 << per_zone;
        }
      }
    }
  }
}

// A cluster of the given zone sizes, nodes named node-0… in zone order.
Cluster ZonesOf(const std::vector<std::pair<std::string, int>>& sizes) {
  Cluster c;
  int i = 0;
  for (const auto& [zone, n] : sizes) {
    for (int j = 0; j < n; ++j, ++i) {
      c.pods.push_back({"podnet-" + std::to_string(i), "node-" + std::to_string(i), zone});
    }
  }
  return c;
}

int Total(const std::map<std::string, int>& by_zone) {
  int n = 0;
  for (const auto& [zone, k] : by_zone) n += k;
  return n;
}

TEST(SelectionTest, ASmallZoneThatCannotCoverABigOneLeavesItToTheOthers) {
  // 300 nodes in zone-a, 30 in zone-b, peers_per_zone 3: zone-b's 90 slots cannot cover
  // zone-a's 300 nodes once, so zone-a's own nodes give each of them 3 (before: 2 of zone-a,
  // and 45 nodes 2 more of zone-b's); zone-b's nodes get 2 of each zone. zone-b's Pods still
  // probe 3 nodes of zone-a each, by rendezvous weight. Never more than peers_per_zone a zone.
  const Cluster c = ZonesOf({{"zone-a", 300}, {"zone-b", 30}});
  int a_from_b = 0;
  for (const auto& [node, probers] : ProbersByZone(c, 3)) {
    const auto& by_zone = probers;  // a lambda may not capture a structured binding (clang)
    auto from = [&](const char* zone) { return by_zone.count(zone) ? by_zone.at(zone) : 0; };
    if (std::stoi(node.substr(5)) >= 300) {
      EXPECT_GE(from("zone-b"), 2) << node;
      EXPECT_GE(from("zone-a"), 2) << node;
    } else {
      EXPECT_GE(from("zone-a"), 3) << node;
      a_from_b += from("zone-b");
    }
  }
  EXPECT_EQ(a_from_b, 90);
  for (const auto& self : c.pods) {
    std::map<std::string, int> per_zone;
    for (const auto& p : SelectPeers(self, Candidates(c, self), 3)) ++per_zone[p.zone];
    for (const auto& [zone, n] : per_zone) EXPECT_LE(n, 3) << self.name << " " << zone;
  }
}

TEST(SelectionTest, ZonesThatCannotGiveTheirSharePassItOn) {
  // One node of unknown zone beside 100 in zone-a: R was ceil(3 / 2) = 2 from each "zone", and
  // the lone node could give 3 duties in all, so 38 of 101 nodes had fewer than 3 probers.
  // Lopsided and tiny zones likewise: each node gets 3 wherever the zones can give them.
  struct Case {
    std::vector<std::pair<std::string, int>> zones;
    int per_zone;
  };
  const std::vector<Case> cases = {
      {{{"zone-a", 100}, {"", 1}}, 3},
      {{{"zone-a", 70}, {"zone-b", 30}}, 3},
      {{{"zone-a", 60}, {"zone-b", 60}, {"zone-c", 1}}, 3},
      {{{"zone-a", 60}, {"zone-b", 60}, {"zone-c", 1}}, 1},
      {{{"zone-a", 40}, {"zone-b", 5}, {"zone-c", 5}}, 3},
  };
  for (const auto& [zones, per_zone] : cases) {
    const Cluster c = ZonesOf(zones);
    for (const auto& [node, by_zone] : ProbersByZone(c, per_zone)) {
      // With peers_per_zone 1, zone-a's 60 nodes have 60 slots for zone-a and zone-b's 60 for
      // zone-a: 2 probers a node is all they hold (zone-c's one slot cannot cover 60).
      const bool held = per_zone == 1 && std::stoi(node.substr(5)) < 120;
      EXPECT_GE(Total(by_zone), held ? 2 : 3)
          << node << " in " << zones.size() << " zones, first of " << zones[0].second << ", k "
          << per_zone;
    }
  }
}

TEST(SelectionTest, AnUnlistedPodTakesNoDuties) {
  // A Pod the others do not list (not ready yet) is on nobody's ring: it takes no duties and
  // picks its peers by rendezvous weight alone.
  const Cluster c = MakeCluster(60, 3);
  const topology::Self self = c.pods[4];
  const auto candidates = Candidates(c, self);
  std::map<std::string, std::vector<std::pair<std::uint64_t, std::string>>> ranked;
  for (const auto& p : candidates) {
    ranked[p.zone].emplace_back(
        RendezvousWeight(SelectionKey(self.name, self.node), SelectionKey(p.name, p.node)), p.name);
  }
  std::set<std::string> want;
  for (auto& [zone, list] : ranked) {
    std::sort(list.rbegin(), list.rend());
    for (int i = 0; i < 2; ++i) want.insert(list[static_cast<std::size_t>(i)].second);
  }
  EXPECT_EQ(NameSet(SelectPeers(self, candidates, 2, /*self_listed=*/false)), want);
  EXPECT_NE(NameSet(SelectPeers(self, candidates, 2)), want);  // its duties, when listed
}

// Peers that `after` has and `before` had not, and the reverse, by name.
std::pair<std::vector<std::string>, std::vector<std::string>> Moved(
    const std::vector<Peer>& before, const std::vector<Peer>& after) {
  std::set<std::string> b = NameSet(before), a = NameSet(after);
  std::vector<std::string> gone, came;
  std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(gone));
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(came));
  return {gone, came};
}

TEST(SelectionTest, MembershipChangeMovesOnlyWhatItMust) {
  // Every one of the 1,000 Pods, when a node joins zone-c. A Pod of another zone changes at
  // most one peer, of zone-c (the newcomer as a duty or by weight, or a duty the newcomer
  // takes over); a zone-c Pod sees a new prober on its own ring, so its duties in any zone
  // may shift along the ring (at most 2 a zone here). In all, 29 of the ~15,000 peers move.
  const Cluster c = MakeCluster(kNodes, kZones);
  Cluster grown = c;
  grown.pods.push_back({"podnet-new", "node-new", "zone-c"});
  std::size_t moved = 0;
  for (const auto& self : c.pods) {
    const auto before = SelectPeers(self, Candidates(c, self), kPerZone);
    const auto after = SelectPeers(self, Candidates(grown, self), kPerZone);
    const auto [gone, came] = Moved(before, after);
    EXPECT_EQ(gone.size(), came.size()) << self.name;
    moved += gone.size();
    std::map<std::string, int> changed_zones;
    for (const auto& p : before) {
      if (std::count(gone.begin(), gone.end(), p.name)) ++changed_zones[p.zone];
    }
    if (self.zone != "zone-c") {
      EXPECT_LE(gone.size(), 1u) << self.name;
      for (const auto& [zone, n] : changed_zones) EXPECT_EQ(zone, "zone-c") << self.name;
    } else {
      for (const auto& [zone, n] : changed_zones) EXPECT_LE(n, 2) << self.name << " " << zone;
    }
  }
  EXPECT_LE(moved, 60u);

  const topology::Self self = c.pods[17];
  const auto before = SelectPeers(self, Candidates(c, self), kPerZone);
  const std::set<std::string> b = NameSet(before);
  // A Pod this Pod does not probe leaves: nothing changes.
  Cluster shrunk = c;
  auto unchosen = std::find_if(shrunk.pods.begin(), shrunk.pods.end(), [&](const auto& p) {
    return p.name != self.name && !b.count(p.name);
  });
  ASSERT_NE(unchosen, shrunk.pods.end());
  shrunk.pods.erase(unchosen);
  EXPECT_EQ(NameSet(SelectPeers(self, Candidates(shrunk, self), kPerZone)), b);

  // A probed Pod leaves: exactly it is replaced, by a Pod of the same zone.
  Cluster lost = c;
  const Peer victim = *std::find_if(before.begin(), before.end(),
                                    [](const Peer& p) { return p.path != PathClass::kSameNode; });
  lost.pods.erase(std::find_if(lost.pods.begin(), lost.pods.end(),
                               [&](const auto& p) { return p.name == victim.name; }));
  auto replaced = SelectPeers(self, Candidates(lost, self), kPerZone);
  std::set<std::string> r = NameSet(replaced);
  EXPECT_EQ(r.size(), b.size());
  EXPECT_FALSE(r.count(victim.name));
  std::vector<std::string> fresh;
  std::set_difference(r.begin(), r.end(), b.begin(), b.end(), std::back_inserter(fresh));
  ASSERT_EQ(fresh.size(), 1u);
  auto fresh_peer = std::find_if(replaced.begin(), replaced.end(),
                                 [&](const Peer& p) { return p.name == fresh[0]; });
  EXPECT_EQ(fresh_peer->zone, victim.zone);
}

TEST(SelectionTest, SmallZonesAndUnknownZonesAreKeptWhole) {
  topology::Self self{"pod-0", "node-0", "zone-a"};
  std::vector<Peer> candidates;
  auto add = [&](std::string name, std::string node, std::string zone) {
    Peer p;
    p.name = std::move(name);
    p.node = std::move(node);
    p.zone = std::move(zone);
    p.path = Classify(self, p.node, p.zone);
    candidates.push_back(p);
  };
  add("pod-1", "node-1", "zone-b");  // a zone with one Pod: it is probed
  for (int i = 0; i < 10; ++i) add("pod-u" + std::to_string(i), "node-u" + std::to_string(i), "");
  auto chosen = SelectPeers(self, candidates, 2);
  std::map<PathClass, int> by_path;
  for (const auto& p : chosen) ++by_path[p.path];
  EXPECT_EQ(by_path[PathClass::kCrossZone], 1);
  EXPECT_EQ(by_path[PathClass::kUnknown], 2);  // unknown zone: one more group with the bound
  EXPECT_EQ(SelectPeers(self, {}, 3).size(), 0u);
  EXPECT_EQ(SelectPeers(self, candidates, 0).size(), 2u);  // < 1 acts as 1
}

TEST(SpreadOverZonesTest, UnderTheCapKeepsEverySortedByName) {
  using testing::MakePeer;
  std::vector<Peer> servers = {MakePeer("dns-b", "10.0.0.2", "n2", "z2", PathClass::kCrossZone),
                               MakePeer("dns-a", "10.0.0.1", "n1", "z1", PathClass::kSameZone)};
  EXPECT_EQ(testing::PeerNames(SpreadOverZones(servers, 2)),
            (std::vector<std::string>{"dns-a", "dns-b"}));
}

TEST(SpreadOverZonesTest, TheCapTakesZonesInTurnOwnZoneFirst) {
  using testing::MakePeer;
  // Self in zone z1 on node n1. Six replicas: three in z2, two in z1 (one on this node), one of
  // unknown zone.
  std::vector<Peer> servers = {
      MakePeer("dns-z2-a", "10.0.2.1", "n21", "z2", PathClass::kCrossZone),
      MakePeer("dns-z2-b", "10.0.2.2", "n22", "z2", PathClass::kCrossZone),
      MakePeer("dns-z2-c", "10.0.2.3", "n23", "z2", PathClass::kCrossZone),
      MakePeer("dns-z1-x", "10.0.1.2", "n12", "z1", PathClass::kSameZone),
      MakePeer("dns-z1-y", "10.0.1.1", "n1", "z1", PathClass::kSameNode),
      MakePeer("dns-nozone", "10.0.9.1", "n9", "", PathClass::kUnknown),
  };
  // One: the own zone's same-node replica.
  EXPECT_EQ(testing::PeerNames(SpreadOverZones(servers, 1)),
            (std::vector<std::string>{"dns-z1-y"}));
  // Three: one of each group, none left out for a zone's second replica.
  EXPECT_EQ(testing::PeerNames(SpreadOverZones(servers, 3)),
            (std::vector<std::string>{"dns-nozone", "dns-z1-y", "dns-z2-a"}));
  // Four: the second turn starts with the own zone.
  EXPECT_EQ(testing::PeerNames(SpreadOverZones(servers, 4)),
            (std::vector<std::string>{"dns-nozone", "dns-z1-x", "dns-z1-y", "dns-z2-a"}));
  // Five: z2's second; then z2's third would be the sixth.
  EXPECT_EQ(SpreadOverZones(servers, 5).size(), 5u);
  EXPECT_EQ(SpreadOverZones(servers, 6).size(), 6u);
  EXPECT_EQ(SpreadOverZones(servers, 100).size(), 6u);
  EXPECT_TRUE(SpreadOverZones(servers, 0).empty());
}

}  // namespace
}  // namespace podnet::topology
