#pragma once

#include <prometheus/registry.h>

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>

#include "exporter/net/address.h"
#include "exporter/responders/echo_limiter.h"
#include "exporter/responders/prober_tally.h"

namespace podnet::responders {

/// The UDP echo responder that peers' `protocol: udp` RTT probes aim at. It answers only
/// podnet probe requests (wire/echo.h: magic, version, kind = request) by sending the
/// datagram back with kind = reply, so it reflects nothing else and two responders cannot
/// ping-pong. A request that asks who answers (wire/echo.h: AskIdentity) gets this responder's
/// node and zone (SetIdentity) in the reply's padding when they fit; the reply is never larger
/// than the request. Bounded: one fixed receive buffer, at most 256 datagrams per wake-up so the
/// responder loop stays responsive, and an EchoLimiter (echo_limiter.h): requests over 9000 bytes
/// are not answered, one source address gets at most 1/16 of the reply and byte budgets, and
/// all sources together at most 20,000 replies and 20 MB per second (defaults of EchoLimits).
/// The path-MTU record (wire/echo.h MtuMode): a request asking kAck is answered by its first
/// 24 bytes (a large request acknowledged small); a request asking kReturn is sent back whole
/// with the don't-fragment bit (IP_PMTUDISC_DO / IPV6_PMTUDISC_DO for that send only), or, when
/// the kernel refuses it (EMSGSIZE), as the small answer flagged kMtuTooBig. No reply is larger
/// than its request (one asking for more is too_large), and both are charged to the budgets
/// above with the request's bytes: the responder is no amplifier (docs/design.md "Path MTU").
/// A request without the record is answered exactly as before.
/// Series: podnet_responder_requests_total{responder="udp_echo",
/// result="answered"|"ignored"|"too_large"|"source_limited"|"rate_limited"|"send_failed"|
/// "receive_buffer"} and podnet_responder_dropped_total{responder="udp_echo",
/// reason="malformed"|"too_large"|"source_limited"|"rate_limited"|"send_failed"|"receive_buffer"}
/// (malformed: not a podnet request, = ignored; send_failed: admitted, but the kernel refused the
/// reply, e.g. to source port 0 or with the send buffer full; receive_buffer: dropped by the
/// kernel before the responder read them, its receive buffer full, counted by SO_RXQ_OVFL when
/// the next datagram is read; its two series from the first such drop, so a Pod whose responder
/// keeps up pays none).
class UdpEchoResponder {
 public:
  /// Binds `listen` (an IPv6 wildcard also accepts IPv4). Throws boost::system::system_error
  /// when the address cannot be bound — a start-up error, reported by the caller.
  UdpEchoResponder(boost::asio::io_context& io, const net::HostPort& listen,
                   prometheus::Registry& registry, const EchoLimits& limits = {});
  ~UdpEchoResponder();

  /// The bound port (useful when listening on port 0).
  std::uint16_t port() const;

  /// Who this responder is, for the identity record of its replies (the effective
  /// topology::Self: node, the zone configured or read from the Node, and the Pod name, sent
  /// when the request leaves room: wire/echo.h). Until it is called, replies carry no
  /// identity. On the responder's loop, or before it runs.
  void SetIdentity(std::string node, std::string zone, std::string pod = {});
  /// Called with the source of every request answered (ProberTally) but discovery's identity
  /// asks (wire::echo::kDiscoveryAsk: every Pod asks every Pod, and is a prober of none);
  /// none by default. On the responder's loop, or before it runs.
  void SetHeardHook(HeardHook heard);

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace podnet::responders
