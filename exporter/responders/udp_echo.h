#pragma once

#include <memory>

#include <boost/asio/io_context.hpp>
#include <prometheus/registry.h>

#include "exporter/net/address.h"

namespace podnet::responders {

/// The UDP echo responder that peers' `protocol: udp` RTT probes aim at. It answers only
/// podnet probe requests (probes/rtt/wire.h: magic, version, kind = request) by sending the
/// datagram back with kind = reply, so it reflects nothing else and two responders cannot
/// ping-pong. Bounded: one fixed receive buffer, at most `max_replies_per_second` replies (a
/// token bucket; the excess is dropped and counted), at most 256 datagrams per wake-up so the
/// responder loop stays responsive. Series: podnet_responder_requests_total{responder="udp_echo",
/// result="answered"|"ignored"|"rate_limited"} and podnet_responder_dropped_total{responder=
/// "udp_echo", reason="rate_limited"|"malformed"} (malformed: not a podnet request, = ignored).
class UdpEchoResponder {
 public:
  /// Binds `listen` (an IPv6 wildcard also accepts IPv4). Throws boost::system::system_error
  /// when the address cannot be bound — a start-up error, reported by the caller.
  UdpEchoResponder(boost::asio::io_context& io, const net::HostPort& listen,
                   prometheus::Registry& registry, double max_replies_per_second = 20000);
  ~UdpEchoResponder();

  /// The bound port (useful when listening on port 0).
  std::uint16_t port() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace podnet::responders
