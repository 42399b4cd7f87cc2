#include "exporter/topology/compose.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/unit/testing/peers.h"

namespace podnet::topology {
namespace {

// A peer as a source gives it: path not yet known (ComposePeers classifies).
Peer In(std::string name, const char* address, std::string node, std::string zone,
        std::uint16_t port = 9479) {
  return testing::MakePeer(std::move(name), address, std::move(node), std::move(zone),
                           PathClass::kUnknown, port);
}

// A peer as ComposePeers must give it.
Peer Out(std::string name, const char* address, std::string node, std::string zone, PathClass path,
         std::uint16_t port = 9479) {
  return testing::MakePeer(std::move(name), address, std::move(node), std::move(zone), path, port);
}

// `p` as discovery names a probe Pod: after its node, the Pod in `pod`.
Peer Named(Peer p, std::string pod) {
  p.pod = std::move(pod);
  return p;
}

struct ComposeCase {
  std::string name;
  Self self;
  std::vector<Peer> static_peers;
  std::vector<Peer> discovered;
  int peers_per_zone;
  std::vector<Peer> want;
  std::size_t want_candidates;
  std::size_t want_selected;
};

void PrintTo(const ComposeCase& c, std::ostream* os) { *os << c.name; }

class ComposePeersTest : public ::testing::TestWithParam<ComposeCase> {};

TEST_P(ComposePeersTest, Composes) {
  const auto& c = GetParam();
  Composition got = ComposePeers(c.self, c.static_peers, c.discovered, {c.peers_per_zone});
  EXPECT_EQ(got.peers, c.want) << "names: "
                               << ::testing::PrintToString(testing::PeerNames(got.peers));
  EXPECT_EQ(got.candidates, c.want_candidates);
  EXPECT_EQ(got.selected, c.want_selected);
}

const Self kSelf{"pod-self", "node-1", "zone-a"};

// Rendezvous weights from node-1 (RendezvousWeight("node-1", key)), which decide the rows that
// select fewer than a zone offers (where `discovered` does not list pod-self, it takes no duties:
// ComposePeersSelfTest has the duties), highest first:
//   zone-a: node-2 16.7e18, node-3 16.3e18, node-4 7.5e18;  zone-b: node-5 11.9e18, node-6 9.3e18;
//   no zone: node-7 12.9e18, node-8 7.9e18;  no node (keyed by Pod name): p-nonode-2 13.8e18,
//   p-nonode-1 9.3e18.
INSTANTIATE_TEST_SUITE_P(
    Table, ComposePeersTest,
    ::testing::Values(
        ComposeCase{"self_excluded_by_name_from_both_lists",
                    kSelf,
                    {In("pod-self", "10.0.9.1", "node-1", "zone-a")},
                    {In("pod-self", "10.0.0.1", "node-1", "zone-a"),
                     In("p-a2", "10.0.0.2", "node-2", "zone-a")},
                    3,
                    {Out("p-a2", "10.0.0.2", "node-2", "zone-a", PathClass::kSameZone)},
                    1,
                    1},
        // Discovered probe Pods are named after their nodes, their Pods in `pod`: this Pod's
        // own endpoint is node-1 with pod-self, and IsSelf finds it by the Pod.
        ComposeCase{
            "self_excluded_by_its_pod_when_named_after_its_node",
            kSelf,
            {},
            {Named(In("node-1", "10.0.0.1", "node-1", "zone-a"), "pod-self"),
             Named(In("node-2", "10.0.0.2", "node-2", "zone-a"), "pod-2")},
            3,
            {Named(Out("node-2", "10.0.0.2", "node-2", "zone-a", PathClass::kSameZone), "pod-2")},
            1,
            1},
        ComposeCase{"static_name_wins_over_a_discovered_peer",
                    kSelf,
                    {In("p-a2", "192.168.0.2", "vm-9", "zone-b", 8080)},
                    {In("p-a2", "10.0.0.2", "node-2", "zone-a"),
                     In("p-b5", "10.0.0.5", "node-5", "zone-b")},
                    3,
                    {Out("p-a2", "192.168.0.2", "vm-9", "zone-b", PathClass::kCrossZone, 8080),
                     Out("p-b5", "10.0.0.5", "node-5", "zone-b", PathClass::kCrossZone)},
                    2,
                    1},
        // p-a2 (node-2) outweighs p-a3 in zone-a; shadowed by the static entry, it still took
        // zone-a's one place, so p-a3 does not come in instead.
        ComposeCase{"shadowed_candidate_keeps_its_place_in_selection",
                    kSelf,
                    {In("p-a2", "192.168.0.2", "node-2", "zone-a")},
                    {In("p-a2", "10.0.0.2", "node-2", "zone-a"),
                     In("p-a3", "10.0.0.3", "node-3", "zone-a")},
                    1,
                    {Out("p-a2", "192.168.0.2", "node-2", "zone-a", PathClass::kSameZone)},
                    2,
                    0},
        // Same-node candidates always; one per zone, own zone included; no zone is one group.
        ComposeCase{
            "peers_per_zone_1_per_zone",
            kSelf,
            {},
            {In("p-n1a", "10.0.1.1", "node-1", "zone-a"),
             In("p-n1b", "10.0.1.2", "node-1", "zone-a"),
             In("p-a2", "10.0.0.2", "node-2", "zone-a"), In("p-a3", "10.0.0.3", "node-3", "zone-a"),
             In("p-a4", "10.0.0.4", "node-4", "zone-a"), In("p-b5", "10.0.0.5", "node-5", "zone-b"),
             In("p-b6", "10.0.0.6", "node-6", "zone-b"), In("p-u7", "10.0.0.7", "node-7", ""),
             In("p-u8", "10.0.0.8", "node-8", "")},
            1,
            {Out("p-a2", "10.0.0.2", "node-2", "zone-a", PathClass::kSameZone),
             Out("p-b5", "10.0.0.5", "node-5", "zone-b", PathClass::kCrossZone),
             Out("p-n1a", "10.0.1.1", "node-1", "zone-a", PathClass::kSameNode),
             Out("p-n1b", "10.0.1.2", "node-1", "zone-a", PathClass::kSameNode),
             Out("p-u7", "10.0.0.7", "node-7", "", PathClass::kUnknown)},
            9,
            5},
        ComposeCase{
            "peers_per_zone_2_per_zone",
            kSelf,
            {},
            {In("p-a2", "10.0.0.2", "node-2", "zone-a"), In("p-a3", "10.0.0.3", "node-3", "zone-a"),
             In("p-a4", "10.0.0.4", "node-4", "zone-a"), In("p-b5", "10.0.0.5", "node-5", "zone-b"),
             In("p-b6", "10.0.0.6", "node-6", "zone-b")},
            2,
            {Out("p-a2", "10.0.0.2", "node-2", "zone-a", PathClass::kSameZone),
             Out("p-a3", "10.0.0.3", "node-3", "zone-a", PathClass::kSameZone),
             Out("p-b5", "10.0.0.5", "node-5", "zone-b", PathClass::kCrossZone),
             Out("p-b6", "10.0.0.6", "node-6", "zone-b", PathClass::kCrossZone)},
            5,
            4},
        ComposeCase{"peers_per_zone_below_1_counts_as_1",
                    kSelf,
                    {},
                    {In("p-b5", "10.0.0.5", "node-5", "zone-b"),
                     In("p-b6", "10.0.0.6", "node-6", "zone-b")},
                    0,
                    {Out("p-b5", "10.0.0.5", "node-5", "zone-b", PathClass::kCrossZone)},
                    2,
                    1},
        // Byte order of names, static and discovered interleaved; input order does not matter.
        ComposeCase{
            "sorted_by_name_across_both_lists",
            kSelf,
            {In("s-d", "192.168.0.4", "vm-1", "zone-b"),
             In("Z-static", "192.168.0.9", "vm-2", "zone-b")},
            {In("p-e", "10.0.0.5", "node-5", "zone-b"), In("p-a", "10.0.0.2", "node-2", "zone-a"),
             In("s-c", "10.0.0.3", "node-3", "zone-c")},
            3,
            {Out("Z-static", "192.168.0.9", "vm-2", "zone-b", PathClass::kCrossZone),
             Out("p-a", "10.0.0.2", "node-2", "zone-a", PathClass::kSameZone),
             Out("p-e", "10.0.0.5", "node-5", "zone-b", PathClass::kCrossZone),
             Out("s-c", "10.0.0.3", "node-3", "zone-c", PathClass::kCrossZone),
             Out("s-d", "192.168.0.4", "vm-1", "zone-b", PathClass::kCrossZone)},
            3,
            3},
        // No nodeName: unknown, and keyed by its Pod name in its zone's group (p-nonode-2
        // outweighs p-nonode-1); a static peer without node is unknown too.
        ComposeCase{"missing_node",
                    kSelf,
                    {In("s-nonode", "192.168.0.1", "", "zone-a")},
                    {In("p-nonode-1", "10.0.0.11", "", "zone-a"),
                     In("p-nonode-2", "10.0.0.12", "", "zone-a")},
                    1,
                    {Out("p-nonode-2", "10.0.0.12", "", "zone-a", PathClass::kUnknown),
                     Out("s-nonode", "192.168.0.1", "", "zone-a", PathClass::kUnknown)},
                    2,
                    1},
        // No zone: same_node still known on this node; on another node unknown, in the one
        // group of unknown zone (node-7 outweighs node-8).
        ComposeCase{"missing_zone",
                    kSelf,
                    {},
                    {In("p-n1", "10.0.1.1", "node-1", ""), In("p-u7", "10.0.0.7", "node-7", ""),
                     In("p-u8", "10.0.0.8", "node-8", "")},
                    1,
                    {Out("p-n1", "10.0.1.1", "node-1", "", PathClass::kSameNode),
                     Out("p-u7", "10.0.0.7", "node-7", "", PathClass::kUnknown)},
                    3,
                    2},
        // This Pod's zone not known (not configured, the Node not read yet): only same_node can
        // be told; selection still groups the others by their own zone.
        ComposeCase{"self_zone_unknown",
                    {"pod-self", "node-1", ""},
                    {In("s-b", "192.168.0.2", "vm-1", "zone-b")},
                    {In("p-n1", "10.0.1.1", "node-1", "zone-a"),
                     In("p-a2", "10.0.0.2", "node-2", "zone-a")},
                    3,
                    {Out("p-a2", "10.0.0.2", "node-2", "zone-a", PathClass::kUnknown),
                     Out("p-n1", "10.0.1.1", "node-1", "zone-a", PathClass::kSameNode),
                     Out("s-b", "192.168.0.2", "vm-1", "zone-b", PathClass::kUnknown)},
                    2,
                    2},
        // A dual-stack Service gives each Pod once (IPv4 kept, MergeSlices); a Pod only in the
        // IPv6 slice comes with its IPv6 address. The family decides nothing.
        ComposeCase{"dual_stack_addresses_kept_path_from_node_and_zone",
                    kSelf,
                    {In("s-six", "fd00::99", "vm-1", "zone-b")},
                    {In("p-four", "10.0.0.2", "node-2", "zone-a"),
                     In("p-six", "fd00::3", "node-3", "zone-a"),
                     In("p-six-here", "fd00::4", "node-1", "zone-b")},
                    3,
                    {Out("p-four", "10.0.0.2", "node-2", "zone-a", PathClass::kSameZone),
                     Out("p-six", "fd00::3", "node-3", "zone-a", PathClass::kSameZone),
                     Out("p-six-here", "fd00::4", "node-1", "zone-b", PathClass::kSameNode),
                     Out("s-six", "fd00::99", "vm-1", "zone-b", PathClass::kCrossZone)},
                    3,
                    3},
        // A path class that came with a peer is not trusted: it is recomputed against self.
        ComposeCase{
            "path_class_recomputed_against_self",
            kSelf,
            {testing::MakePeer("s-b", "192.168.0.2", "vm-1", "zone-b", PathClass::kSameNode)},
            {testing::MakePeer("p-a2", "10.0.0.2", "node-2", "zone-a", PathClass::kCrossZone)},
            3,
            {Out("p-a2", "10.0.0.2", "node-2", "zone-a", PathClass::kSameZone),
             Out("s-b", "192.168.0.2", "vm-1", "zone-b", PathClass::kCrossZone)},
            1,
            1},
        ComposeCase{"zero_candidates_static_only",
                    kSelf,
                    {In("s-b", "192.168.0.2", "vm-1", "zone-b"),
                     In("s-a", "192.168.0.1", "vm-2", "zone-a")},
                    {In("pod-self", "10.0.0.1", "node-1", "zone-a")},
                    3,
                    {Out("s-a", "192.168.0.1", "vm-2", "zone-a", PathClass::kSameZone),
                     Out("s-b", "192.168.0.2", "vm-1", "zone-b", PathClass::kCrossZone)},
                    0,
                    0},
        // Discovery that has not listed yet gives no candidates: the static peers alone.
        ComposeCase{"unsynced_discovery_static_only",
                    kSelf,
                    {In("s-a", "192.168.0.1", "vm-2", "zone-a")},
                    {},
                    3,
                    {Out("s-a", "192.168.0.1", "vm-2", "zone-a", PathClass::kSameZone)},
                    0,
                    0},
        ComposeCase{"nothing_at_all", kSelf, {}, {}, 3, {}, 0, 0}),
    [](const auto& info) { return info.param.name; });

// Every Pod of a 30-node, 3-zone cluster composes with the same duty ring, whatever it knows of
// itself: a Pod whose zone the Node has not told it yet (self.zone "") places itself on the ring
// where its EndpointSlice entry does, as every other Pod does, so it takes the duties the
// others leave to it. Before, it took the duties of the unknown zone and left its own zone's
// undone: 3 to 5 nodes under 3 probers.
TEST(ComposePeersSelfTest, TheRingPlacesAPodByItsOwnRecord) {
  std::vector<Peer> discovered;
  for (int i = 0; i < 30; ++i) {
    const std::string node = "node-" + std::to_string(i);
    const std::string zone = std::string("zone-") + static_cast<char>('a' + i % 3);
    const std::string address = "10.0.0." + std::to_string(i + 1);
    discovered.push_back(Named(In(node, address.c_str(), node, zone), "pod-" + std::to_string(i)));
  }
  std::map<std::string, int> probers;
  std::map<std::string, int> probers_zone_unread;
  for (int i = 0; i < 30; ++i) {
    const Peer& me = discovered[static_cast<std::size_t>(i)];
    for (const Peer& p : ComposePeers({me.pod, me.node, me.zone}, {}, discovered, {1}).peers) {
      ++probers[p.node];
    }
    // The same cluster, where every Pod has yet to read its zone.
    for (const Peer& p : ComposePeers({me.pod, me.node, ""}, {}, discovered, {1}).peers) {
      ++probers_zone_unread[p.node];
    }
  }
  ASSERT_EQ(probers.size(), 30u);
  for (const auto& [node, n] : probers) EXPECT_EQ(n, 3) << node;
  EXPECT_EQ(probers_zone_unread, probers);
}

}  // namespace
}  // namespace podnet::topology
