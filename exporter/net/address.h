#pragma once

#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace podnet::net {

/// A parsed "HOST:PORT" listen address. `host` is an IP literal; empty or "0.0.0.0" binds all
/// IPv4 addresses, "[::]" all IPv6 (and IPv4-mapped) addresses.
struct HostPort {
  boost::asio::ip::address address;
  std::uint16_t port = 0;
};

/// Parses an IPv4 or IPv6 literal (no brackets, no zone index). std::nullopt on anything else.
std::optional<boost::asio::ip::address> ParseIp(std::string_view text);

/// Parses "HOST:PORT", "[V6]:PORT" or ":PORT" (all IPv4 addresses). Hostnames are rejected:
/// a listen address must not depend on DNS. Returns std::nullopt and sets *error on bad input.
std::optional<HostPort> ParseHostPort(std::string_view text, std::string* error);

/// The address as one source: an IPv4 sender seen through an IPv6 socket (::ffff:a.b.c.d) is
/// a.b.c.d, as over IPv4; every other address unchanged.
boost::asio::ip::address Unmapped(const boost::asio::ip::address& a);

/// "1.2.3.4:80" or "[::1]:80".
std::string FormatHostPort(const boost::asio::ip::address& a, std::uint16_t port);

}  // namespace podnet::net
