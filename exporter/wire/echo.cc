#include "exporter/wire/echo.h"

#include <algorithm>

namespace podnet::wire::echo {
namespace {

void Put16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
void Put32(std::uint8_t* p, std::uint32_t v) {
  Put16(p, static_cast<std::uint16_t>(v >> 16));
  Put16(p + 2, static_cast<std::uint16_t>(v));
}
void Put64(std::uint8_t* p, std::uint64_t v) {
  Put32(p, static_cast<std::uint32_t>(v >> 32));
  Put32(p + 4, static_cast<std::uint32_t>(v));
}
std::uint16_t Get16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
std::uint32_t Get32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(Get16(p)) << 16 | Get16(p + 2);
}
std::uint64_t Get64(const std::uint8_t* p) {
  return static_cast<std::uint64_t>(Get32(p)) << 32 | Get32(p + 4);
}

// A payload of n >= kHeaderSize bytes at p.
void WritePayload(const Header& h, std::uint8_t* p, std::size_t n) {
  Put32(p, kMagic);
  p[4] = kVersion;
  p[5] = static_cast<std::uint8_t>(h.kind);
  Put16(p + 6, h.seq);
  Put64(p + 8, h.token);
  for (std::size_t i = kHeaderSize; i < n; ++i) p[i] = static_cast<std::uint8_t>(i);
}

// The 8-byte ICMP echo request header over out[0..8) and its checksum (IPv4) over all of out.
void WriteIcmpHeader(bool v6, std::uint16_t ident, std::uint16_t seq, std::span<std::uint8_t> out) {
  out[0] = v6 ? kIcmp6EchoRequest : kIcmpEchoRequest;
  out[1] = 0;
  Put16(out.data() + 2, 0);
  Put16(out.data() + 4, ident);
  Put16(out.data() + 6, seq);
  if (!v6) Put16(out.data() + 2, InternetChecksum(out));
}

}  // namespace

std::vector<std::uint8_t> EncodePayload(const Header& h, std::size_t size) {
  std::vector<std::uint8_t> out(size < kHeaderSize ? kHeaderSize : size);
  WritePayload(h, out.data(), out.size());
  return out;
}

std::optional<Header> DecodePayload(std::span<const std::uint8_t> data) {
  if (data.size() < kHeaderSize || Get32(data.data()) != kMagic || data[4] != kVersion) {
    return std::nullopt;
  }
  std::uint8_t kind = data[5];
  if (kind != static_cast<std::uint8_t>(Kind::kRequest) &&
      kind != static_cast<std::uint8_t>(Kind::kReply)) {
    return std::nullopt;
  }
  Header h;
  h.kind = static_cast<Kind>(kind);
  h.seq = Get16(data.data() + 6);
  h.token = Get64(data.data() + 8);
  return h;
}

bool ValidIdentityName(std::string_view s) {
  if (s.size() > 255) return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == '-';
  });
}

bool AskIdentity(std::span<std::uint8_t> payload, bool discovery) {
  if (payload.size() < kHeaderSize + 4) return false;
  Put32(payload.data() + kHeaderSize, discovery ? kDiscoveryAsk : kIdentityAsk);
  return true;
}

bool IsDiscoveryAsk(std::span<const std::uint8_t> payload) {
  return payload.size() >= kHeaderSize + 4 && Get32(payload.data() + kHeaderSize) == kDiscoveryAsk;
}

IdentityRead ReadIdentity(std::span<const std::uint8_t> payload, Identity* out) {
  if (payload.size() < kHeaderSize + 4 || Get32(payload.data() + kHeaderSize) != kIdentity) {
    return IdentityRead::kAbsent;
  }
  std::span<const std::uint8_t> rest = payload.subspan(kHeaderSize + 4);
  std::string fields[2];
  for (std::string& f : fields) {
    if (rest.empty() || rest.size() - 1 < rest[0]) return IdentityRead::kMalformed;
    f.assign(reinterpret_cast<const char*>(rest.data() + 1), rest[0]);
    rest = rest.subspan(1 + rest[0]);
    if (!ValidIdentityName(f)) return IdentityRead::kMalformed;
  }
  std::string pod;
  if (rest.size() >= 4 && Get32(rest.data()) == kIdentityPod) {
    rest = rest.subspan(4);
    if (rest.empty() || rest.size() - 1 < rest[0]) return IdentityRead::kMalformed;
    pod.assign(reinterpret_cast<const char*>(rest.data() + 1), rest[0]);
    if (pod.empty() || !ValidIdentityName(pod)) return IdentityRead::kMalformed;
  }
  out->node = std::move(fields[0]);
  out->zone = std::move(fields[1]);
  out->pod = std::move(pod);
  return IdentityRead::kPresent;
}

bool MakeReply(std::span<std::uint8_t> data, const Identity* self) {
  auto h = DecodePayload(data);
  if (!h || h->kind != Kind::kRequest) return false;
  data[5] = static_cast<std::uint8_t>(Kind::kReply);
  if (self == nullptr || data.size() < kHeaderSize + 4 ||
      (Get32(data.data() + kHeaderSize) != kIdentityAsk && !IsDiscoveryAsk(data))) {
    return true;
  }
  std::size_t record = 4 + 1 + self->node.size() + 1 + self->zone.size();
  if (record > data.size() - kHeaderSize || !ValidIdentityName(self->node) ||
      !ValidIdentityName(self->zone)) {
    return true;  // answered as before: the prober counts "no identity"
  }
  std::uint8_t* p = data.data() + kHeaderSize;
  Put32(p, kIdentity);
  p += 4;
  for (const std::string* f : {&self->node, &self->zone}) {
    *p++ = static_cast<std::uint8_t>(f->size());
    p = std::copy(f->begin(), f->end(), p);
  }
  std::size_t with_pod = record + 4 + 1 + self->pod.size();
  if (!self->pod.empty() && with_pod <= data.size() - kHeaderSize && ValidIdentityName(self->pod)) {
    Put32(p, kIdentityPod);
    p += 4;
    *p++ = static_cast<std::uint8_t>(self->pod.size());
    std::copy(self->pod.begin(), self->pod.end(), p);
  }
  return true;
}

bool AskMtu(std::span<std::uint8_t> payload, MtuMode mode, std::uint16_t size) {
  if (payload.size() < kMtuAckBytes) return false;
  std::uint8_t* p = payload.data() + kHeaderSize;
  Put32(p, kMtuAsk);
  p[4] = static_cast<std::uint8_t>(mode);
  p[5] = 0;
  Put16(p + 6, size);
  return true;
}

namespace {

std::optional<MtuRecord> ReadMtuRecord(std::span<const std::uint8_t> payload, std::uint32_t tag) {
  if (payload.size() < kMtuAckBytes || Get32(payload.data() + kHeaderSize) != tag) {
    return std::nullopt;
  }
  const std::uint8_t* p = payload.data() + kHeaderSize;
  if (p[4] != static_cast<std::uint8_t>(MtuMode::kAck) &&
      p[4] != static_cast<std::uint8_t>(MtuMode::kReturn)) {
    return std::nullopt;
  }
  return MtuRecord{static_cast<MtuMode>(p[4]), p[5], Get16(p + 6)};
}

}  // namespace

std::optional<MtuRecord> ReadMtuAsk(std::span<const std::uint8_t> payload) {
  auto r = ReadMtuRecord(payload, kMtuAsk);
  if (r) r->flags = 0;  // a request's flags are reserved: only an answer says kMtuTooBig
  return r;
}

std::optional<MtuRecord> ReadMtuAnswer(std::span<const std::uint8_t> payload) {
  return ReadMtuRecord(payload, kMtuAnswer);
}

std::size_t MakeMtuAnswer(std::span<std::uint8_t> data, std::size_t received, MtuRecord record) {
  bool small = record.mode == MtuMode::kAck || (record.flags & kMtuTooBig) != 0;
  std::size_t n = small ? kMtuAckBytes : record.size;
  if (n < kMtuAckBytes || n > received || data.size() < n) return 0;
  std::uint8_t* p = data.data() + kHeaderSize;
  Put32(p, kMtuAnswer);
  p[4] = static_cast<std::uint8_t>(record.mode);
  p[5] = record.flags;
  Put16(p + 6, record.mode == MtuMode::kAck
                   ? static_cast<std::uint16_t>(std::min<std::size_t>(received, 0xFFFF))
                   : record.size);
  return n;
}

std::uint16_t InternetChecksum(std::span<const std::uint8_t> data) {
  std::uint32_t sum = 0;
  std::size_t i = 0;
  for (; i + 1 < data.size(); i += 2) sum += Get16(data.data() + i);
  if (i < data.size()) sum += static_cast<std::uint32_t>(data[i]) << 8;
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

std::vector<std::uint8_t> EncodeIcmpEcho(bool v6, std::uint16_t ident, std::uint16_t seq,
                                         std::span<const std::uint8_t> payload) {
  std::vector<std::uint8_t> out(8 + payload.size());
  std::copy(payload.begin(), payload.end(), out.begin() + 8);
  WriteIcmpHeader(v6, ident, seq, out);
  return out;
}

void EncodeRequest(EchoKind kind, std::uint16_t ident, const Header& h, std::size_t size,
                   std::vector<std::uint8_t>& out) {
  std::size_t payload = size < kHeaderSize ? kHeaderSize : size;
  std::size_t icmp = kind == EchoKind::kUdp ? 0 : 8;
  out.resize(icmp + payload);
  WritePayload(h, out.data() + icmp, payload);
  if (icmp != 0) WriteIcmpHeader(kind == EchoKind::kIcmp6, ident, h.seq, out);
}

std::optional<IcmpEcho> ParseIcmpEchoReply(bool v6, bool with_ip_header,
                                           std::span<const std::uint8_t> data) {
  if (with_ip_header) {
    if (data.empty() || (data[0] >> 4) != 4) return std::nullopt;
    std::size_t ihl = static_cast<std::size_t>(data[0] & 0x0F) * 4;
    if (ihl < 20 || data.size() < ihl) return std::nullopt;
    data = data.subspan(ihl);
  }
  if (data.size() < 8) return std::nullopt;
  if (data[0] != (v6 ? kIcmp6EchoReply : kIcmpEchoReply) || data[1] != 0) return std::nullopt;
  IcmpEcho e;
  e.ident = Get16(data.data() + 4);
  e.seq = Get16(data.data() + 6);
  e.payload = data.subspan(8);
  return e;
}

}  // namespace podnet::wire::echo
