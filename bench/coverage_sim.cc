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
// A NODES of the form A/B/… gives each zone's size instead (zone-a has A nodes, zone-b B, …;
// ZONES is then ignored), and a size written ?N is N nodes of unknown zone (no zone label):
// e.g. 300/300/1 or 100/?1.
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

// Zone sizes "A/B/?C": zone-a A nodes, zone-b B, C of unknown zone; empty on a bad spec.
std::vector<Node> ClusterOfSizes(const std::string& spec) {
  std::vector<Node> out;
  std::size_t start = 0;
  for (char zone = 'a'; start <= spec.size(); ++zone) {
    std::size_t end = spec.find('/', start);
    if (end == std::string::npos) end = spec.size();
    std::string part = spec.substr(start, end - start);
    const bool unknown = !part.empty() && part[0] == '?';
    const int n = std::atoi(part.c_str() + (unknown ? 1 : 0));
    if (n < 1 || n > 20000 || zone > 'z') return {};
    for (int i = 0; i < n; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "node-%05zu", out.size());
      out.push_back({name, unknown ? std::string() : std::string("zone-") + zone});
    }
    start = end + 1;
  }
  return out;
}

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

void Simulate(const std::vector<Node>& cluster, const std::string& what, int k) {
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
      "%s, peers_per_zone %d: probers per node min %d p1 %d p5 %d median %d max %d; watched by "
      "none %d, by fewer than 3 %d, by no other zone %d, from fewer than 2 zones %d\n",
      what.c_str(), k, sorted.front(), Percentile(sorted, 1), Percentile(sorted, 5),
      Percentile(sorted, 50), sorted.back(), none, under3, no_other, under2_zones);
}

}  // namespace

int main(int argc, char** argv) {
  int k = argc > 1 ? std::atoi(argv[1]) : 3;
  int zones = argc > 2 ? std::atoi(argv[2]) : 3;
  if (k < 1 || zones < 1 || zones > 26) {
    std::fprintf(stderr, "usage: podnet-bench-coverage [K>=1] [ZONES 1-26] [NODES...]\n");
    return 2;
  }
  std::vector<std::string> specs(argv + std::min(argc, 3), argv + argc);
  if (specs.empty()) specs = {"30", "300", "3000"};
  for (const std::string& spec : specs) {
    if (spec.find_first_of("/?") != std::string::npos) {
      const std::vector<Node> cluster = ClusterOfSizes(spec);
      if (cluster.size() < 2) {
        std::fprintf(stderr, "zone sizes must be N/N/... or ?N, each 1-20000, got %s\n",
                     spec.c_str());
        return 2;
      }
      Simulate(cluster, "zone sizes " + spec, k);
      continue;
    }
    const int n = std::atoi(spec.c_str());
    if (n < 2 || n > 20000) {
      std::fprintf(stderr, "NODES must be 2-20000, got %s\n", spec.c_str());
      return 2;
    }
    Simulate(Cluster(n, zones), std::to_string(n) + " nodes, " + std::to_string(zones) + " zones",
             k);
    if (n <= 3000) Churn(n, zones, k);
  }
  return 0;
}
