#include "exporter/discovery/static_peers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/unit/testing/peers.h"

namespace podnet::discovery {
namespace {

using boost::asio::ip::make_address;
using topology::Peer;

const topology::Self kSelfA{"pod-a", "node-1", "zone-a"};

config::StaticPeer SP(std::string name, const char* address, std::string node, std::string zone,
                      std::uint16_t port = 9479, std::uint16_t burst_port = 5201) {
  return testing::MakeStaticPeer(std::move(name), address, std::move(node), std::move(zone), port,
                                 burst_port);
}

Peer P(std::string name, const char* address, std::string node, std::string zone,
       topology::PathClass path, std::uint16_t port = 9479, std::uint16_t burst_port = 5201) {
  return testing::MakePeer(std::move(name), address, std::move(node), std::move(zone), path, port,
                           burst_port);
}

std::vector<std::string> Names(const std::vector<Peer>& peers) { return testing::PeerNames(peers); }

TEST(StaticPeersTest, SkipsSelfSortsByNameAndClassifies) {
  std::vector<config::StaticPeer> in = {
      SP("zeta", "10.0.0.9", "node-3", "zone-b", 9000, 6000),
      SP("pod-a", "10.0.0.1", "node-1", "zone-a"),  // this Pod itself
      SP("alpha", "10.0.0.2", "node-1", "zone-a"),
      SP("mid", "fd00::5", "node-2", "zone-a"),
      SP("beta", "10.0.0.4", "", ""),
  };
  auto peers = StaticPeers(kSelfA, in);
  EXPECT_EQ(Names(peers), (std::vector<std::string>{"alpha", "beta", "mid", "zeta"}));
  ASSERT_EQ(peers.size(), 4u);
  EXPECT_EQ(peers[0], P("alpha", "10.0.0.2", "node-1", "zone-a", topology::PathClass::kSameNode));
  EXPECT_EQ(peers[1], P("beta", "10.0.0.4", "", "", topology::PathClass::kUnknown));
  EXPECT_EQ(peers[2], P("mid", "fd00::5", "node-2", "zone-a", topology::PathClass::kSameZone));
  EXPECT_EQ(peers[3],
            P("zeta", "10.0.0.9", "node-3", "zone-b", topology::PathClass::kCrossZone, 9000, 6000));
}

TEST(StaticPeersTest, SelfIsMatchedByNameOnly) {
  // A peer on this node with another name is probed; a peer with this Pod's name is not,
  // wherever it claims to be.
  std::vector<config::StaticPeer> in = {SP("pod-a", "10.9.9.9", "node-7", "zone-z"),
                                        SP("pod-b", "10.0.0.1", "node-1", "zone-a")};
  EXPECT_EQ(Names(StaticPeers(kSelfA, in)), (std::vector<std::string>{"pod-b"}));
  EXPECT_TRUE(StaticPeers(kSelfA, {}).empty());
  EXPECT_TRUE(StaticPeers(kSelfA, {SP("pod-a", "10.0.0.1", "node-1", "zone-a")}).empty());
}

TEST(StaticPeersTest, OrderDoesNotDependOnInputOrder) {
  std::vector<config::StaticPeer> in = {
      SP("c", "10.0.0.3", "n", "z"), SP("a", "10.0.0.1", "n", "z"), SP("b", "10.0.0.2", "n", "z")};
  auto first = StaticPeers(kSelfA, in);
  std::reverse(in.begin(), in.end());
  EXPECT_EQ(StaticPeers(kSelfA, in), first);
  EXPECT_EQ(Names(first), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(StaticPeersTest, DiffOfTwoConfigurations) {
  topology::Self self{"pod-a", "node-1", "zone-a"};
  auto before = StaticPeers(
      self, {SP("b", "10.0.0.2", "node-2", "zone-a"), SP("c", "10.0.0.3", "node-3", "zone-b")});
  // c's node is relabelled to zone-a; d appears; b is unchanged.
  auto after = StaticPeers(
      self, {SP("d", "10.0.0.4", "node-1", "zone-a"), SP("c", "10.0.0.3", "node-3", "zone-a"),
             SP("b", "10.0.0.2", "node-2", "zone-a")});
  topology::PeerDiff d = topology::Diff(before, after);
  EXPECT_EQ(Names(d.kept), (std::vector<std::string>{"b"}));
  EXPECT_EQ(Names(d.removed), (std::vector<std::string>{"c"}));
  EXPECT_EQ(Names(d.added), (std::vector<std::string>{"c", "d"}));
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].path, topology::PathClass::kCrossZone);
  ASSERT_EQ(d.added.size(), 2u);
  EXPECT_EQ(d.added[0].path, topology::PathClass::kSameZone);
  EXPECT_EQ(d.added[1].path, topology::PathClass::kSameNode);
}

}  // namespace
}  // namespace podnet::discovery
