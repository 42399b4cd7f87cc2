#pragma once

// Peers for tests: one line per topology::Peer or peers.static[] entry, the names of a peer
// list, and how gtest prints a Peer.

#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "exporter/config/config.h"
#include "exporter/topology/topology.h"

namespace podnet::topology {

/// How gtest prints a Peer in a failed expectation: every field, on one line.
inline void PrintTo(const Peer& p, std::ostream* os) {
  *os << "{" << p.name << " " << p.address.to_string() << " port " << p.port << " burst "
      << p.burst_port << " node \"" << p.node << "\" zone \"" << p.zone << "\" "
      << PathClassName(p.path) << (p.pod.empty() ? "" : " pod " + p.pod) << "}";
}

}  // namespace podnet::topology

namespace podnet::testing {

/// A peer with every field given (address as an IP literal; ports default as a DaemonSet's).
inline topology::Peer MakePeer(std::string name, const char* address, std::string node,
                               std::string zone, topology::PathClass path,
                               std::uint16_t port = 9479, std::uint16_t burst_port = 5201) {
  topology::Peer p;
  p.name = std::move(name);
  p.address = boost::asio::ip::make_address(address);
  p.port = port;
  p.burst_port = burst_port;
  p.node = std::move(node);
  p.zone = std::move(zone);
  p.path = path;
  return p;
}

/// A peers.static[] entry with every field given (address as an IP literal).
inline config::StaticPeer MakeStaticPeer(std::string name, const char* address, std::string node,
                                         std::string zone, std::uint16_t port = 9479,
                                         std::uint16_t burst_port = 5201) {
  config::StaticPeer p;
  p.name = std::move(name);
  p.address = boost::asio::ip::make_address(address);
  p.port = port;
  p.burst_port = burst_port;
  p.node = std::move(node);
  p.zone = std::move(zone);
  return p;
}

/// The peers' names, in their order.
inline std::vector<std::string> PeerNames(const std::vector<topology::Peer>& peers) {
  std::vector<std::string> out;
  for (const auto& p : peers) out.push_back(p.name);
  return out;
}

}  // namespace podnet::testing
