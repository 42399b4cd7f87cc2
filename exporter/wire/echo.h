#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace podnet::wire::echo {

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

/// Who answered: the responder's node and zone (topology::Self), carried by every answer so that
/// an answer that came through a Service VIP is attributed to the backend that served it.
struct Identity {
  std::string node;
  std::string zone;
  std::string pod;  // the responder's Pod name (topology::Self::name); "" when not sent

  bool operator==(const Identity&) const = default;
};

/// The identity record. A prober that wants to know who answers writes kIdentityAsk into the
/// padding right after the header (AskIdentity); a responder that knows this record replaces it,
/// in the reply, by
///
///   16          20         21        21+n       22+n       22+n+m         26+n+m
///   | kIdentity | node len | node ... | zone len | zone ... | [kIdentityPod | pod len | pod ...]
///   | rest of the padding unchanged
///
/// (lengths one byte each) when the record fits in the request's size, and otherwise answers as
/// before. The Pod part is written only when the Pod is known and it fits too (a prober that
/// wants it leaves room: kIdentityPodPayloadSize); readers that predate it stop after the zone. The
/// reply is never larger than the request (the responder must not become an amplifying reflector),
/// so a prober leaves room: kIdentityPayloadSize fits every legal name. Compatibility: the header
/// (magic, version 1, kind) is unchanged, so old responders answer new probers (echoing
/// kIdentityAsk: "no identity") and new responders answer old probers (whose padding is the byte
/// pattern i, never kIdentityAsk) exactly as before.
inline constexpr std::uint32_t kIdentityAsk = 0x504E493F;  // "PNI?"
/// The same ask from discovery (discovery/kubernetes/dns_discovery.h), not from a probe: answered
/// alike, but a responder does not count its source as a prober watching it (coverage,
/// responders::ProberTally), since every Pod asks every Pod. An old responder echoes it: "no
/// identity".
inline constexpr std::uint32_t kDiscoveryAsk = 0x504E4944;  // "PNID"
inline constexpr std::uint32_t kIdentity = 0x504E493D;      // "PNI="
/// Header + record with a 253-byte node (the longest DNS subdomain, a Kubernetes node name) and a
/// 63-byte zone (the longest label value): 16 + 4 + 1 + 253 + 1 + 63 = 338, rounded up.
inline constexpr std::size_t kIdentityPayloadSize = 384;
/// The marker of the record's optional Pod part: 4 bytes no padding pattern (the byte i at
/// offset i) can hold.
inline constexpr std::uint32_t kIdentityPod = 0x504E4970;  // "PNIp"
/// Room for the whole record with a 253-byte Pod name (a DNS subdomain) too: 338 + 4 + 1 + 253
/// = 596, rounded up (discovery's identity asks, discovery/dns_peers.h).
inline constexpr std::size_t kIdentityPodPayloadSize = 640;
/// The HTTP /echo response header fields with the same identity (RFC 6648: no "X-" prefix).
inline constexpr std::string_view kNodeHeader = "Podnet-Node";
inline constexpr std::string_view kZoneHeader = "Podnet-Zone";

/// Whether `s` may be a node or zone in an identity: at most 255 bytes of [A-Za-z0-9._-] (a DNS
/// subdomain or a Kubernetes label value). An answer's identity becomes a label value; anything
/// else is refused (a hostile responder must not mint arbitrary label values).
bool ValidIdentityName(std::string_view s);

/// Writes kIdentityAsk (kDiscoveryAsk with `discovery`) into a request payload. False (payload
/// untouched) when it is shorter than kHeaderSize + 4.
bool AskIdentity(std::span<std::uint8_t> payload, bool discovery = false);
/// Whether a request asks who answers for discovery (kDiscoveryAsk); read it before MakeReply,
/// which replaces the ask by the record.
bool IsDiscoveryAsk(std::span<const std::uint8_t> payload);

/// What a reply says about who answered.
enum class IdentityRead {
  kAbsent,     // no record: an old responder, one that does not know itself, or no room for it
  kPresent,    // *out holds the responder's node and zone, and its Pod when the record has it
  kMalformed,  // a record whose lengths run past the payload, or with names ValidIdentityName
               // refuses
};
IdentityRead ReadIdentity(std::span<const std::uint8_t> payload, Identity* out);

/// Turns a request payload into the reply in place (kind := reply). Returns false, leaving the
/// data untouched, unless it is a valid request — the UDP echo responder's whole decision. With
/// `self` (valid names) and a request that asks for it, the identity record is written into the
/// padding when it fits; the size never changes.
bool MakeReply(std::span<std::uint8_t> data, const Identity* self = nullptr);

/// The path-MTU record (probes/mtu): how a prober tells the two directions of a path apart. A
/// request carries, right after the header,
///
///   16        20     21      22         24
///   | kMtuAsk | mode | flags | size (BE) | rest of the padding
///
/// and a responder that knows it answers with kMtuAnswer in its place:
///  - kAck: the reply is cut to kMtuAckBytes (header and record), `size` = the request's bytes
///    as received (a UDP payload), so a large request crossing the forward path comes back as a
///    small datagram that any return path carries;
///  - kReturn: the reply is the request itself, cut to `size` bytes (a UDP payload; the prober
///    names its request's own size, so it comes back whole), sent with the don't-fragment bit:
///    a request that crossed the forward path asks the return path to carry the same size. A reply
///    is never larger than its request: a `size` above the request's bytes is refused (no reply),
///    so the responder amplifies nothing, whoever asks. When the responder's kernel refuses to send
///    it (EMSGSIZE: a path MTU it learned from an ICMP error, or its interface), it answers
///    kAck-sized with kMtuTooBig in `flags` instead.
/// Compatibility: the header is unchanged, so an old responder echoes the request whole, record
/// included ("PNM?": the prober sees it was not understood), and a new responder answers a
/// request without the record exactly as before. kReturn has the wire value of the mode that
/// asked for a padded reply of up to 8 times the request (podnet before the path-MTU probe's
/// review): such a responder answers a kReturn request alike; its probers' small requests get
/// no reply from a new responder (their reverse direction reads `no_reverse`).
inline constexpr std::uint32_t kMtuAsk = 0x504E4D3F;     // "PNM?"
inline constexpr std::uint32_t kMtuAnswer = 0x504E4D3D;  // "PNM="
enum class MtuMode : std::uint8_t { kAck = 1, kReturn = 2 };
inline constexpr std::uint8_t kMtuTooBig = 1;  // flags of a kReturn answer: not sent, EMSGSIZE
inline constexpr std::size_t kMtuAckBytes = kHeaderSize + 8;

struct MtuRecord {
  MtuMode mode = MtuMode::kAck;
  std::uint8_t flags = 0;
  std::uint16_t size = 0;
};

/// Writes the request record into `payload` (≥ kMtuAckBytes; false, untouched, otherwise).
bool AskMtu(std::span<std::uint8_t> payload, MtuMode mode, std::uint16_t size);
/// The record of a request (kMtuAsk; its flags read as 0: reserved) or of an answer
/// (kMtuAnswer), when present and well-formed.
std::optional<MtuRecord> ReadMtuAsk(std::span<const std::uint8_t> payload);
std::optional<MtuRecord> ReadMtuAnswer(std::span<const std::uint8_t> payload);
/// Responder side: turns the reply MakeReply made of an MTU request of `received` bytes (the
/// first bytes of `data`) into its answer in place and returns the bytes to send. kAck: the
/// answer record (size = `received`), kMtuAckBytes. kReturn: the answer record, `record.size`
/// bytes (the request's own), or with kMtuTooBig in record.flags the kAck-sized answer that
/// says so. Returns 0 (nothing to send) when `received` or `data` is shorter than the answer,
/// or a kReturn asks for more bytes than `received`: a reply is never larger than its request.
std::size_t MakeMtuAnswer(std::span<std::uint8_t> data, std::size_t received, MtuRecord record);

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

}  // namespace podnet::wire::echo
