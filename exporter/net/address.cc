#include "exporter/net/address.h"

#include <charconv>

namespace podnet::net {

std::optional<boost::asio::ip::address> ParseIp(std::string_view text) {
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address(std::string(text), ec);
  if (ec) return std::nullopt;
  if (a.is_v6() && a.to_v6().scope_id() != 0) return std::nullopt;
  return a;
}

boost::asio::ip::address Unmapped(const boost::asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6());
  }
  return a;
}

std::optional<HostPort> ParseHostPort(std::string_view text, std::string* error) {
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      *error = "expected \"[IPv6]:PORT\"";
      return std::nullopt;
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      *error = "expected \"HOST:PORT\"";
      return std::nullopt;
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      *error = "an IPv6 host needs brackets: \"[HOST]:PORT\"";
      return std::nullopt;
    }
  }
  HostPort hp;
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc{} || ptr != port.data() + port.size() || value > 65535) {
    *error = "port must be a number from 0 to 65535, got \"" + std::string(port) + "\"";
    return std::nullopt;
  }
  hp.port = static_cast<std::uint16_t>(value);
  if (host.empty()) {
    hp.address = boost::asio::ip::address_v4::any();
    return hp;
  }
  auto ip = ParseIp(host);
  if (!ip) {
    *error = "host must be an IP address, got \"" + std::string(host) + "\"";
    return std::nullopt;
  }
  hp.address = *ip;
  return hp;
}

std::string FormatHostPort(const boost::asio::ip::address& a, std::uint16_t port) {
  if (a.is_v6()) return "[" + a.to_string() + "]:" + std::to_string(port);
  return a.to_string() + ":" + std::to_string(port);
}

}  // namespace podnet::net
