#include "exporter/discovery/kubernetes/endpoint_peer.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "exporter/topology/burst_pairs.h"
#include "tests/unit/discovery/fixtures.h"
#include "tests/unit/testing/peers.h"

namespace podnet::discovery::kubernetes {
namespace {

using testing::EndpointJson;
using testing::json;
using testing::SliceJson;
using topology::PathClass;
using topology::Peer;

// An endpoint as the API server sends it, without `field` (nodeName or zone: both optional in
// discovery.k8s.io/v1).
json Without(json endpoint, const char* field) {
  endpoint.erase(field);
  return endpoint;
}

struct Slice {
  std::string name;
  std::string address_type;
  std::vector<json> endpoints;
};

struct Case {
  const char* what;
  topology::Self self;
  std::vector<Slice> slices;
  std::vector<Peer> want;  // burst_port stays Peer's default: PeerOf does not set it
};

// What the App does with the Service's slices: ReadyEndpoints per slice, MergeSlices, PeerOf.
std::vector<Peer> PeersOf(const Case& c, std::uint16_t port) {
  std::map<std::string, std::vector<Endpoint>> slices;
  for (const Slice& s : c.slices) {
    std::string err;
    auto endpoints = ReadyEndpoints(SliceJson(s.name, "1", s.endpoints, s.address_type), &err);
    EXPECT_TRUE(endpoints) << err;
    if (endpoints) slices[s.name] = *endpoints;
  }
  std::vector<Peer> out;
  for (const Endpoint& e : MergeSlices(slices)) out.push_back(PeerOf(c.self, e, port));
  return out;
}

TEST(EndpointPeerTest, FieldCasesOfSlicesBecomeClassifiedPeers) {
  const topology::Self self{"pod-self", "node-1", "zone-a"};
  const topology::Self no_zone{"pod-self", "node-1", ""};
  using testing::MakePeer;
  const Case cases[] = {
      {"one IPv4 slice: the ladder from node and zone",
       self,
       {{"v4",
         "IPv4",
         {EndpointJson("p-node", "10.0.0.2", "node-1", "zone-a"),
          EndpointJson("p-zone", "10.0.0.3", "node-2", "zone-a"),
          EndpointJson("p-cross", "10.0.0.4", "node-3", "zone-b")}}},
       {MakePeer("p-cross", "10.0.0.4", "node-3", "zone-b", PathClass::kCrossZone, 8080),
        MakePeer("p-node", "10.0.0.2", "node-1", "zone-a", PathClass::kSameNode, 8080),
        MakePeer("p-zone", "10.0.0.3", "node-2", "zone-a", PathClass::kSameZone, 8080)}},
      {"dual stack: a Pod in the IPv4 and the IPv6 slice is one peer at its IPv4 address",
       self,
       {{"v6", "IPv6", {EndpointJson("p-dual", "fd00::5", "node-3", "zone-b")}},
        {"v4", "IPv4", {EndpointJson("p-dual", "10.0.0.5", "node-3", "zone-b")}}},
       {MakePeer("p-dual", "10.0.0.5", "node-3", "zone-b", PathClass::kCrossZone, 8080)}},
      {"IPv6 only: the IPv6 address, classified as any other",
       self,
       {{"v6", "IPv6", {EndpointJson("p-six", "fd00::6", "node-2", "zone-a")}}},
       {MakePeer("p-six", "fd00::6", "node-2", "zone-a", PathClass::kSameZone, 8080)}},
      {"no nodeName: unknown, even with this Pod's zone",
       self,
       {{"v4", "IPv4", {Without(EndpointJson("p-nonode", "10.0.0.7", "", "zone-a"), "nodeName")}}},
       {MakePeer("p-nonode", "10.0.0.7", "", "zone-a", PathClass::kUnknown, 8080)}},
      {"no zone: same_node on this node, unknown on another",
       self,
       {{"v4",
         "IPv4",
         {Without(EndpointJson("p-here", "10.0.0.8", "node-1", ""), "zone"),
          Without(EndpointJson("p-there", "10.0.0.9", "node-2", ""), "zone")}}},
       {MakePeer("p-here", "10.0.0.8", "node-1", "", PathClass::kSameNode, 8080),
        MakePeer("p-there", "10.0.0.9", "node-2", "", PathClass::kUnknown, 8080)}},
      {"this Pod's zone unknown: only same_node can be told",
       no_zone,
       {{"v4",
         "IPv4",
         {EndpointJson("p-node", "10.0.0.2", "node-1", "zone-a"),
          EndpointJson("p-zone", "10.0.0.3", "node-2", "zone-a")}}},
       {MakePeer("p-node", "10.0.0.2", "node-1", "zone-a", PathClass::kSameNode, 8080),
        MakePeer("p-zone", "10.0.0.3", "node-2", "zone-a", PathClass::kUnknown, 8080)}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(PeersOf(c, 8080), c.want);
  }
}

// The probe Pods as ProbePeersOf gives them (the Service's one slice, merged as the App does).
std::vector<Peer> ProbePeers(const topology::Self& self, std::vector<json> endpoints) {
  std::string err;
  auto ready = ReadyEndpoints(SliceJson("s", "1", std::move(endpoints), "IPv4"), &err);
  EXPECT_TRUE(ready) << err;
  std::map<std::string, std::vector<Endpoint>> slices;
  if (ready) slices["s"] = *ready;
  return ProbePeersOf(self, MergeSlices(slices), 9479, 5202);
}

Peer Probe(const char* node, const char* address, const char* zone, PathClass path,
           const char* pod) {
  Peer p = testing::MakePeer(node, address, node, zone, path, 9479, 5202);
  p.pod = pod;
  return p;
}

TEST(ProbePeersOfTest, NamesEachProbePodAfterItsNodeSelfIncluded) {
  const topology::Self self{"podnet-x1", "node-1", "zone-a"};
  EXPECT_EQ(ProbePeers(self, {EndpointJson("podnet-x1", "10.0.0.1", "node-1", "zone-a"),
                              EndpointJson("podnet-x2", "10.0.0.2", "node-2", "zone-a"),
                              EndpointJson("podnet-x3", "10.0.0.3", "node-3", "zone-b")}),
            (std::vector<Peer>{
                Probe("node-1", "10.0.0.1", "zone-a", PathClass::kSameNode, "podnet-x1"),
                Probe("node-2", "10.0.0.2", "zone-a", PathClass::kSameZone, "podnet-x2"),
                Probe("node-3", "10.0.0.3", "zone-b", PathClass::kCrossZone, "podnet-x3")}));
}

// The property the names are for: a DaemonSet's rollout replaces every Pod (new name, new
// address) and keeps every `peer` value, so no series of a new name appears.
TEST(ProbePeersOfTest, ARolloutKeepsEveryPeerName) {
  const topology::Self self{"podnet-new1", "node-1", "zone-a"};
  auto before = ProbePeers(self, {EndpointJson("podnet-old2", "10.0.0.2", "node-2", "zone-a"),
                                  EndpointJson("podnet-old3", "10.0.0.3", "node-3", "zone-b")});
  auto after = ProbePeers(self, {EndpointJson("podnet-new2", "10.0.1.2", "node-2", "zone-a"),
                                 EndpointJson("podnet-new3", "10.0.1.3", "node-3", "zone-b")});
  EXPECT_EQ(testing::PeerNames(before), testing::PeerNames(after));
  EXPECT_EQ(testing::PeerNames(after), (std::vector<std::string>{"node-2", "node-3"}));
  EXPECT_EQ(after[0].pod, "podnet-new2");
}

TEST(ProbePeersOfTest, TwoPodsOnANodeAreOnePeer) {
  const topology::Self self{"podnet-me", "node-1", "zone-a"};
  // maxSurge: the new Pod beside the old on node-2 (the smaller address kept), and a second
  // probe Pod on this Pod's own node (this Pod kept, whatever its address).
  EXPECT_EQ(
      ProbePeers(self, {EndpointJson("podnet-b", "10.0.0.9", "node-2", "zone-a"),
                        EndpointJson("podnet-a", "10.0.0.4", "node-2", "zone-a"),
                        EndpointJson("podnet-other", "10.0.0.1", "node-1", "zone-a"),
                        EndpointJson("podnet-me", "10.0.0.8", "node-1", "zone-a")}),
      (std::vector<Peer>{Probe("node-1", "10.0.0.8", "zone-a", PathClass::kSameNode, "podnet-me"),
                         Probe("node-2", "10.0.0.4", "zone-a", PathClass::kSameZone, "podnet-a")}));
}

// A node pool kept out of bursts: its Pods (a second DaemonSet without the `burst` container
// port) sit in slices whose ports do not name it (the EndpointSlice controller drops a named
// target port a Pod lacks). They take no part in coordinated bursts, on either end; nothing
// changes while no slice names the port, or for a slice that lists no ports.
TEST(ProbePeersOfTest, PodsInSlicesWithoutTheBurstPortTakeNoPartInBursts) {
  auto slice = [](const std::string& name, std::vector<json> endpoints,
                  std::vector<std::string> ports) {
    json s = SliceJson(name, "1", std::move(endpoints), "IPv4");
    s.erase("ports");  // SliceJson's own: http
    if (!ports.empty()) s["ports"] = json::array();
    for (const auto& p : ports) s["ports"].push_back({{"name", p}, {"port", 1}});
    return s;
  };
  auto peers = [&](const topology::Self& self, std::vector<std::string> pool_ports,
                   std::vector<std::string> other_ports) {
    std::map<std::string, std::vector<Endpoint>> slices;
    std::string err;
    for (const auto& s :
         {slice("a",
                {EndpointJson("podnet-x1", "10.0.0.1", "node-1", "zone-a"),
                 EndpointJson("podnet-x3", "10.0.0.3", "node-3", "zone-b")},
                other_ports),
          slice("pool", {EndpointJson("podnet-x2", "10.0.0.2", "node-2", "zone-a")}, pool_ports)}) {
      auto ready = ReadyEndpoints(s, &err);
      EXPECT_TRUE(ready) << err;
      slices[s["metadata"]["name"]] = ready.value_or(std::vector<Endpoint>{});
    }
    return ProbePeersOf(self, MergeSlices(slices), 9479, 5202);
  };
  auto burst_ports = [](const std::vector<Peer>& list) {
    std::vector<int> out;
    for (const auto& p : list) out.push_back(p.burst_port);
    return out;
  };
  const topology::Self x1{"podnet-x1", "node-1", "zone-a"};
  const topology::Self x2{"podnet-x2", "node-2", "zone-a"};
  auto kept = peers(x1, {"http", "echo"}, {"http", "echo", "burst"});
  EXPECT_EQ(testing::PeerNames(kept), (std::vector<std::string>{"node-1", "node-2", "node-3"}));
  EXPECT_EQ(burst_ports(kept), (std::vector<int>{5202, 0, 5202}));
  EXPECT_EQ(testing::PeerNames(topology::BurstCandidates(x1, kept)),
            (std::vector<std::string>{"node-1", "node-3"}));
  // The pool's own Pod decides no pair at all.
  EXPECT_TRUE(topology::BurstCandidates(x2, peers(x2, {"http"}, {"http", "burst"})).empty());
  // No slice names the port (a Service without it), or the pool's slice lists no ports: all in.
  EXPECT_EQ(burst_ports(peers(x1, {"http"}, {"http"})), (std::vector<int>{5202, 5202, 5202}));
  EXPECT_EQ(burst_ports(peers(x1, {}, {"http", "burst"})), (std::vector<int>{5202, 5202, 5202}));
  EXPECT_EQ(topology::BurstCandidates(x2, peers(x2, {}, {"http", "burst"})).size(), 3u);
}

TEST(ProbePeersOfTest, AnEndpointWithoutANodeKeepsItsPodName) {
  const topology::Self self{"podnet-me", "node-1", "zone-a"};
  auto peers =
      ProbePeers(self, {Without(EndpointJson("podnet-n", "10.0.0.5", "", "zone-a"), "nodeName")});
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].name, "podnet-n");
  EXPECT_EQ(peers[0].pod, "");
  EXPECT_EQ(peers[0].path, PathClass::kUnknown);
}

}  // namespace
}  // namespace podnet::discovery::kubernetes
