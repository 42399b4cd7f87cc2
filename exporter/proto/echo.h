#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace podnet::proto::echo {

/// The first bytes of every RTT probe payload (ICMP echo data or UDP echo datagram), network
/// byte order:
///
///   0      4        5       6      8               16
///   | magic | version| kind  | seq  |     token     |  padding to `size` ...
///
/// `magic` "PNET" lets the UDP echo responder answer only our probes (never reflect arbitrary
/// traffic); `kind` is request or reply so two responders cannot echo each other in a loop;
/// `token` is random per prober and train slot, so a stray or forged reply never matches.
inline constexpr std::uint32_t kMagic = 0x504E4554;  // "PNET"
inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::size_t kHeaderSize = 16;

enum class Kind : std::uint8_t { kRequest = 1, kReply = 2 };

struct Header {
  Kind kind = Kind::kRequest;
  std::uint16_t seq = 0;
  std::uint64_t token = 0;
};

/// Writes a probe payload of `size` bytes (≥ kHeaderSize; the rest is a fixed pattern).
std::vector<std::uint8_t> EncodePayload(const Header& h, std::size_t size);

/// Reads the header of a probe payload; std::nullopt when too short, wrong magic or version.
std::optional<Header> DecodePayload(std::span<const std::uint8_t> data);

/// Turns a request payload into the reply in place (kind := reply). Returns false, leaving the
/// data untouched, unless it is a valid request — the UDP echo responder's whole decision.
bool MakeReply(std::span<std::uint8_t> data);

/// The Internet checksum (RFC 1071) over `data`, in network byte order as stored in a header.
std::uint16_t InternetChecksum(std::span<const std::uint8_t> data);

/// ICMP echo types: RFC 792 (IPv4) and RFC 4443 (ICMPv6).
inline constexpr std::uint8_t kIcmpEchoRequest = 8;
inline constexpr std::uint8_t kIcmpEchoReply = 0;
inline constexpr std::uint8_t kIcmp6EchoRequest = 128;
inline constexpr std::uint8_t kIcmp6EchoReply = 129;

/// An ICMP(v6) echo request: 8-byte header (type, code, checksum, identifier, sequence) and the
/// payload. For IPv4 the checksum is filled in; for ICMPv6 the kernel computes it (RFC 3542 §3.1).
std::vector<std::uint8_t> EncodeIcmpEcho(bool v6, std::uint16_t ident, std::uint16_t seq,
                                         std::span<const std::uint8_t> payload);

enum class EchoKind { kUdp, kIcmp4, kIcmp6 };

/// A whole request as a prober sends it, written into `out` (resized; its capacity is reused, so
/// sending allocates nothing): for kUdp the payload EncodePayload(h, size) alone, for ICMP that
/// payload behind the echo header EncodeIcmpEcho(v6, ident, h.seq, ·) writes. Same bytes as those.
void EncodeRequest(EchoKind kind, std::uint16_t ident, const Header& h, std::size_t size,
                   std::vector<std::uint8_t>& out);

/// A parsed ICMP echo reply. `payload` points into the buffer passed to ParseIcmpEchoReply.
struct IcmpEcho {
  std::uint16_t ident = 0;
  std::uint16_t seq = 0;
  std::span<const std::uint8_t> payload;
};

/// Parses an echo reply. `with_ip_header`: the data starts with an IPv4 header (raw IPv4 sockets
/// deliver it; ICMPv6 raw and datagram "ping" sockets do not). std::nullopt for anything that is
/// not a well-formed echo reply.
std::optional<IcmpEcho> ParseIcmpEchoReply(bool v6, bool with_ip_header,
                                           std::span<const std::uint8_t> data);

}  // namespace podnet::proto::echo
