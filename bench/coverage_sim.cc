// podnet-bench-coverage: how many probers watch each node, from the selection code alone
// (bench/README.md, "Coverage of the peer selection").
//
// A cluster of N nodes in Z zones (node-00000…, zones zone-a…, dealt round-robin), one probe Pod
// a node named after it, as discovery gives them. Every Pod runs topology::SelectPeers with
// `peers_per_zone` K over all the others, as the exporter does with peers.kubernetes; each
// selected peer counts its prober and the prober's zone. Printed per cluster size: the
// distribution of probers per node (min, p1, p5, median, max) against the mean K × N / (N / Z)
// = K × Z, the nodes watched by fewer than 3 probers or by none, and those without a prober from
// another zone; then, up to 3,000 nodes, the churn one joining node causes. Nothing is sent
// anywhere; deterministic (the selection is a pure hash).
// Usage: podnet-bench-coverage [K=3] [ZONES=3] [NODES...=30 300 3000]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "exporter/topology/selection.h"
#include "exporter/topology/topology.h"

namespace {

using podnet::topology::Peer;
using podnet::topology::Self;

struct Node {
  std::string name;
  std::string zone;
};

std::vector<Node> Cluster(int nodes, int zones) {
  std::vector<Node> out;
  for (int i = 0; i < nodes; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", i);
    out.push_back({name, std::string("zone-") + static_cast<char>('a' + i % zones)});
  }
  return out;
}

// The p-th percentile (0..100) of sorted `v`, nearest rank.
int Percentile(const std::vector<int>& v, double p) {
  std::size_t i = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// The Pod on node `p` of `cluster` as discovery gives it to the others, classified for `self`.
std::vector<Peer> CandidatesOf(const std::vector<Node>& cluster, std::size_t p) {
  const Self self{cluster[p].name, cluster[p].name, cluster[p].zone};
  std::vector<Peer> candidates;
  candidates.reserve(cluster.size() - 1);
  for (std::size_t q = 0; q < cluster.size(); ++q) {
    if (q == p) continue;
    Peer peer;
    peer.name = cluster[q].name;
    peer.node = cluster[q].name;
    peer.zone = cluster[q].zone;
    peer.path = podnet::topology::Classify(self, peer.node, peer.zone);
    candidates.push_back(std::move(peer));
  }
  return candidates;
}

std::set<std::string> Chosen(const std::vector<Node>& cluster, std::size_t p, int k) {
  const Self self{cluster[p].name, cluster[p].name, cluster[p].zone};
  std::set<std::string> out;
  for (const Peer& c : podnet::topology::SelectPeers(self, CandidatesOf(cluster, p), k)) {
    out.insert(c.name);
  }
  return out;
}

// Churn: one node joins zone-a; how many of the other Pods change peers, and how many peers
// change in all (each a set of series started and one left to go stale).
void Churn(int nodes, int zones, int k) {
  std::vector<Node> before = Cluster(nodes, zones);
  std::vector<Node> after = before;
  after.push_back({"node-99999", "zone-a"});
  int pods_changed = 0, peers_changed = 0;
  for (std::size_t p = 0; p < before.size(); ++p) {
    std::set<std::string> b = Chosen(before, p, k), a = Chosen(after, p, k);
    int gone = 0;
    for (const auto& name : b) gone += a.count(name) ? 0 : 1;
    pods_changed += gone > 0 || a.size() != b.size() ? 1 : 0;
    peers_changed += gone;
  }
  std::printf(
      "%6d nodes, %d zones, peers_per_zone %d: one node joins zone-a: %d of %d Pods change "
      "peers, %d peers replaced in all\n",
      nodes, zones, k, pods_changed, nodes, peers_changed);
}

void Simulate(int nodes, int zones, int k) {
  const std::vector<Node> cluster = Cluster(nodes, zones);
  std::vector<int> probers(cluster.size(), 0);
  std::vector<std::set<std::string>> prober_zones(cluster.size());
  std::vector<int> other_zone(cluster.size(), 0);
  for (std::size_t p = 0; p < cluster.size(); ++p) {
    for (const std::string& name : Chosen(cluster, p, k)) {
      // node-NNNNN: the index is the name's number.
      std::size_t q = std::strtoul(name.c_str() + 5, nullptr, 10);
      ++probers[q];
      prober_zones[q].insert(cluster[p].zone);
      if (cluster[p].zone != cluster[q].zone) ++other_zone[q];
    }
  }
  std::vector<int> sorted = probers;
  std::sort(sorted.begin(), sorted.end());
  auto count = [&](auto pred) {
    int n = 0;
    for (std::size_t i = 0; i < cluster.size(); ++i) n += pred(i) ? 1 : 0;
    return n;
  };
  int none = count([&](std::size_t i) { return probers[i] == 0; });
  int under3 = count([&](std::size_t i) { return probers[i] < 3; });
  int no_other = count([&](std::size_t i) { return other_zone[i] == 0; });
  int under2_zones = count([&](std::size_t i) { return prober_zones[i].size() < 2; });
  std::printf(
      "%6d nodes, %d zones, peers_per_zone %d: probers per node min %d p1 %d p5 %d median %d "
      "max %d (mean %d); watched by none %d, by fewer than 3 %d, by no other zone %d, from "
      "fewer than 2 zones %d\n",
      nodes, zones, k, sorted.front(), Percentile(sorted, 1), Percentile(sorted, 5),
      Percentile(sorted, 50), sorted.back(), k * zones, none, under3, no_other, under2_zones);
}

}  // namespace

int main(int argc, char** argv) {
  int k = argc > 1 ? std::atoi(argv[1]) : 3;
  int zones = argc > 2 ? std::atoi(argv[2]) : 3;
  if (k < 1 || zones < 1 || zones > 26) {
    std::fprintf(stderr, "usage: podnet-bench-coverage [K>=1] [ZONES 1-26] [NODES...]\n");
    return 2;
  }
  std::vector<int> sizes;
  for (int i = 3; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {30, 300, 3000};
  for (int n : sizes) {
    if (n < 2 || n > 20000) {
      std::fprintf(stderr, "NODES must be 2-20000, got %d\n", n);
      return 2;
    }
    Simulate(n, zones, k);
    if (n <= 3000) Churn(n, zones, k);
  }
  return 0;
}
