#include "exporter/topology/topology.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/unit/testing/peers.h"

namespace podnet::topology {
namespace {

using boost::asio::ip::make_address;

// --------------------------------------------------------------------------------------------
// Classify

struct ClassifyCase {
  std::string name;
  topology::Self self;
  std::string peer_node;
  std::string peer_zone;
  PathClass want;
};

void PrintTo(const ClassifyCase& c, std::ostream* os) { *os << c.name; }

class ClassifyTest : public ::testing::TestWithParam<ClassifyCase> {};

TEST_P(ClassifyTest, Classifies) {
  const auto& c = GetParam();
  EXPECT_EQ(PathClassName(Classify(c.self, c.peer_node, c.peer_zone)), PathClassName(c.want));
}

const topology::Self kSelfA{"pod-a", "node-1", "zone-a"};

INSTANTIATE_TEST_SUITE_P(
    Table, ClassifyTest,
    ::testing::Values(
        ClassifyCase{"same_node", kSelfA, "node-1", "zone-a", PathClass::kSameNode},
        // The node decides: a zone label that disagrees (or is missing) cannot move a peer on
        // the same node to another rung.
        ClassifyCase{"same_node_other_zone_label", kSelfA, "node-1", "zone-b",
                     PathClass::kSameNode},
        ClassifyCase{"same_node_peer_zone_unknown", kSelfA, "node-1", "", PathClass::kSameNode},
        ClassifyCase{"same_node_self_zone_unknown",
                     {"pod-a", "node-1", ""},
                     "node-1",
                     "zone-a",
                     PathClass::kSameNode},
        ClassifyCase{"same_node_both_zones_unknown",
                     {"pod-a", "node-1", ""},
                     "node-1",
                     "",
                     PathClass::kSameNode},
        ClassifyCase{"same_zone", kSelfA, "node-2", "zone-a", PathClass::kSameZone},
        ClassifyCase{"cross_zone", kSelfA, "node-3", "zone-b", PathClass::kCrossZone},
        ClassifyCase{"peer_node_empty", kSelfA, "", "zone-a", PathClass::kUnknown},
        ClassifyCase{
            "self_node_empty", {"pod-a", "", "zone-a"}, "node-1", "zone-a", PathClass::kUnknown},
        // Two empty node names are not "the same node".
        ClassifyCase{
            "both_nodes_empty", {"pod-a", "", "zone-a"}, "", "zone-a", PathClass::kUnknown},
        ClassifyCase{"peer_zone_empty_other_node", kSelfA, "node-2", "", PathClass::kUnknown},
        ClassifyCase{"self_zone_empty_other_node",
                     {"pod-a", "node-1", ""},
                     "node-2",
                     "zone-a",
                     PathClass::kUnknown},
        // Two empty zones are not "the same zone".
        ClassifyCase{"both_zones_empty_other_node",
                     {"pod-a", "node-1", ""},
                     "node-2",
                     "",
                     PathClass::kUnknown}),
    [](const auto& info) { return info.param.name; });

TEST(PathClassTest, LabelValues) {
  EXPECT_EQ(PathClassName(PathClass::kSameNode), "same_node");
  EXPECT_EQ(PathClassName(PathClass::kSameZone), "same_zone");
  EXPECT_EQ(PathClassName(PathClass::kCrossZone), "cross_zone");
  EXPECT_EQ(PathClassName(PathClass::kUnknown), "unknown");
  // kAllPathClasses lists every class once, in ladder order.
  std::vector<std::string_view> names;
  for (auto p : kAllPathClasses) names.push_back(PathClassName(p));
  EXPECT_EQ(names,
            (std::vector<std::string_view>{"same_node", "same_zone", "cross_zone", "unknown"}));
}

// --------------------------------------------------------------------------------------------
// Test peers

Peer P(std::string name, const char* address, std::string node, std::string zone,
       topology::PathClass path, std::uint16_t port = 9479, std::uint16_t burst_port = 5201) {
  return testing::MakePeer(std::move(name), address, std::move(node), std::move(zone), path, port,
                           burst_port);
}

std::vector<std::string> Names(const std::vector<Peer>& peers) { return testing::PeerNames(peers); }

// --------------------------------------------------------------------------------------------
// Diff

struct DiffCase {
  std::string name;
  std::vector<Peer> before;
  std::vector<Peer> after;
  std::vector<Peer> added;
  std::vector<Peer> removed;
  std::vector<Peer> kept;
};

void PrintTo(const DiffCase& c, std::ostream* os) { *os << c.name; }

class DiffTest : public ::testing::TestWithParam<DiffCase> {};

TEST_P(DiffTest, Diffs) {
  const auto& c = GetParam();
  PeerDiff d = Diff(c.before, c.after);
  EXPECT_EQ(d.added, c.added) << "added: " << ::testing::PrintToString(Names(d.added));
  EXPECT_EQ(d.removed, c.removed) << "removed: " << ::testing::PrintToString(Names(d.removed));
  EXPECT_EQ(d.kept, c.kept) << "kept: " << ::testing::PrintToString(Names(d.kept));
}

const Peer kA = P("a", "10.0.0.1", "node-1", "zone-a", PathClass::kSameNode);
const Peer kB = P("b", "10.0.0.2", "node-2", "zone-a", PathClass::kSameZone);
const Peer kC = P("c", "10.0.0.3", "node-3", "zone-b", PathClass::kCrossZone);
const Peer kD = P("d", "10.0.0.4", "node-4", "zone-b", PathClass::kCrossZone);
// c after its node moved to zone-a: the same name, a different peer.
const Peer kCZoneChanged = P("c", "10.0.0.3", "node-3", "zone-a", PathClass::kSameZone);
const Peer kCAddressChanged = P("c", "10.0.0.33", "node-3", "zone-b", PathClass::kCrossZone);
const Peer kCPortChanged = P("c", "10.0.0.3", "node-3", "zone-b", PathClass::kCrossZone, 9480);

INSTANTIATE_TEST_SUITE_P(
    Table, DiffTest,
    ::testing::Values(
        DiffCase{"both_empty", {}, {}, {}, {}, {}},
        DiffCase{"all_new", {}, {kA, kB}, {kA, kB}, {}, {}},
        DiffCase{"all_gone", {kA, kB}, {}, {}, {kA, kB}, {}},
        DiffCase{"unchanged", {kA, kB, kC}, {kA, kB, kC}, {}, {}, {kA, kB, kC}},
        DiffCase{"added_removed_kept", {kA, kB, kC}, {kB, kC, kD}, {kD}, {kA}, {kB, kC}},
        DiffCase{"zone_changed_is_removed_and_added",
                 {kA, kB, kC},
                 {kA, kB, kCZoneChanged},
                 {kCZoneChanged},
                 {kC},
                 {kA, kB}},
        DiffCase{"address_changed_is_removed_and_added",
                 {kC},
                 {kCAddressChanged},
                 {kCAddressChanged},
                 {kC},
                 {}},
        DiffCase{"port_changed_is_removed_and_added",
                 {kC, kD},
                 {kCPortChanged, kD},
                 {kCPortChanged},
                 {kC},
                 {kD}},
        DiffCase{
            "mixed", {kA, kC, kD}, {kB, kCZoneChanged, kD}, {kB, kCZoneChanged}, {kA, kC}, {kD}}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace podnet::topology
