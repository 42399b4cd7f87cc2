#include "exporter/topology/topology.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exporter/topology/safe_text.h"
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

// --------------------------------------------------------------------------------------------
// SafeText: strings from the API server, a peer or a report file before they become labels,
// log fields or printed text.

// Whether `s` is well-formed UTF-8 without any control character (C0, DEL, C1).
bool CleanUtf8(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) return false;
    std::size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (c >= 0x80 && c < 0xC2) return false;
    if (i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    if (c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0) return false;  // C1
    i += n;
  }
  return true;
}

TEST(SafeTextTest, PlainAndUnicodeTextIsUnchanged) {
  TextRepairs r;
  for (std::string s : {"", "zone-a", "ip-10-0-1-2.ap-northeast-2.compute.internal",
                        "z\xC3\xA9ro \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80", "tab-less"}) {
    EXPECT_EQ(SafeText(s, 253, &r), s);
  }
  EXPECT_FALSE(r.any());
  EXPECT_EQ(SafeText(std::string(253, 'a'), 253, &r), std::string(253, 'a'));  // exactly fits
  EXPECT_FALSE(r.any());
}

TEST(SafeTextTest, ControlCharactersNulAndInvalidUtf8AreShownNotPassedOn) {
  TextRepairs r;
  EXPECT_EQ(SafeText(std::string("a\0b", 3), 63, &r), "a\\x00b");
  EXPECT_EQ(SafeText("\x1b[2J\x1b]0;owned\x07", 63, &r), "\\x1b[2J\\x1b]0;owned\\x07");
  EXPECT_EQ(SafeText("line\r\nbreak\x7f", 63, &r), "line\\x0d\\x0abreak\\x7f");
  EXPECT_EQ(SafeText("csi\xC2\x9B"
                     "31m",
                     63, &r),
            "csi\\u009b31m");  // C1 CSI = ESC [
  // Not UTF-8: a stray continuation byte, a lead byte cut short, an overlong '/', a surrogate,
  // past U+10FFFF, 0xFF.
  EXPECT_EQ(SafeText("a\x80z", 63, &r), "a\\x80z");
  EXPECT_EQ(SafeText("a\xC3", 63, &r), "a\\xc3");
  EXPECT_EQ(SafeText("\xC0\xAF", 63, &r), "\\xc0\\xaf");
  EXPECT_EQ(SafeText("\xED\xA0\x80", 63, &r), "\\xed\\xa0\\x80");
  EXPECT_EQ(SafeText("\xF4\x90\x80\x80", 63, &r), "\\xf4\\x90\\x80\\x80");
  EXPECT_EQ(SafeText("\xFF", 63, &r), "\\xff");
  EXPECT_EQ(r.escaped, 10u);
  EXPECT_EQ(r.truncated, 0u);
}

TEST(SafeTextTest, AMegabyteIsCutAtItsBoundOnACharacterBoundaryWithAMarker) {
  const std::string kMarker = "\xE2\x80\xA6";
  TextRepairs r;
  std::string mb(1 << 20, 'x');
  std::string got = SafeText(mb, kMaxLabelValueBytes, &r);
  EXPECT_EQ(got, std::string(60, 'x') + kMarker);
  EXPECT_EQ(r.truncated, 1u);
  // Multi-byte characters and escapes are never split.
  std::string wide;
  for (int i = 0; i < 100000; ++i) wide += "\xE6\x97\xA5";  // 日, 3 bytes
  got = SafeText(wide, 64, &r);
  EXPECT_LE(got.size(), 64u);
  EXPECT_TRUE(CleanUtf8(got)) << got;
  EXPECT_EQ(got.substr(got.size() - 3), kMarker);
  std::string nuls(1 << 20, '\0');
  got = SafeText(nuls, kMaxSubdomainBytes, &r);
  EXPECT_LE(got.size(), kMaxSubdomainBytes);
  EXPECT_EQ(got.find('\0'), std::string::npos);
  EXPECT_EQ(got.substr(0, 8), "\\x00\\x00");
  EXPECT_EQ(got.substr(got.size() - 3), kMarker);
  EXPECT_EQ(got.size(), 62 * 4 + 3u);  // whole escapes only
  // Every bound, every mix: never longer, always clean.
  std::string mix = std::string("ok\x1b\xC3\xA9\xFF\0", 8) + wide.substr(0, 30) + "\xC2\x9B";
  for (std::size_t max = 0; max < 80; ++max) {
    got = SafeText(mix, max);
    EXPECT_LE(got.size(), max) << max;
    EXPECT_TRUE(CleanUtf8(got)) << max << ": " << got;
  }
}

}  // namespace
}  // namespace podnet::topology
