#include "exporter/wire/echo.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/unit/testing/bytes.h"

namespace podnet::wire::echo {
namespace {

using Bytes = std::vector<std::uint8_t>;
using podnet::testing::Truncated;
using podnet::testing::WithByte;

// --------------------------------------------------------------------------------------------
// The probe payload.

struct PayloadCase {
  Kind kind;
  std::uint16_t seq;
  std::uint64_t token;
  std::size_t size;
};

void PrintTo(const PayloadCase& c, std::ostream* os) {
  *os << (c.kind == Kind::kRequest ? "request" : "reply") << " seq " << c.seq << " token "
      << c.token << " size " << c.size;
}

class PayloadTest : public ::testing::TestWithParam<PayloadCase> {};

TEST_P(PayloadTest, EncodesTheDocumentedLayoutAndRoundTrips) {
  const auto& c = GetParam();
  Bytes p = EncodePayload({c.kind, c.seq, c.token}, c.size);
  ASSERT_EQ(p.size(), std::max(c.size, kHeaderSize));
  // wire/echo.h: magic "PNET" | version | kind | seq | token, network byte order.
  EXPECT_EQ(std::string(p.begin(), p.begin() + 4), "PNET");
  EXPECT_EQ(p[4], 1);
  EXPECT_EQ(p[5], static_cast<std::uint8_t>(c.kind));
  EXPECT_EQ(p[6], c.seq >> 8);
  EXPECT_EQ(p[7], c.seq & 0xFF);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(p[8 + i], static_cast<std::uint8_t>(c.token >> (56 - 8 * i))) << "token byte " << i;
  }
  auto h = DecodePayload(p);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->kind, c.kind);
  EXPECT_EQ(h->seq, c.seq);
  EXPECT_EQ(h->token, c.token);
}

INSTANTIATE_TEST_SUITE_P(Table, PayloadTest,
                         ::testing::Values(PayloadCase{Kind::kRequest, 0, 0, 16},
                                           PayloadCase{Kind::kRequest, 1, 0x0102030405060708, 56},
                                           PayloadCase{Kind::kReply, 0xFFFF, ~0ULL, 1472},
                                           PayloadCase{Kind::kReply, 0x1234, 42, 17},
                                           // Shorter than the header: padded up to it.
                                           PayloadCase{Kind::kRequest, 7, 7, 0},
                                           PayloadCase{Kind::kRequest, 7, 7, 15}),
                         [](const auto& info) {
                           const PayloadCase& c = info.param;
                           return std::string(c.kind == Kind::kRequest ? "request" : "reply") +
                                  "_seq" + std::to_string(c.seq) + "_size" + std::to_string(c.size);
                         });

TEST(PayloadTest, PaddingIsTheSameForEveryHeader) {
  // Only the header may differ between two payloads of one size (the rest is a fixed pattern).
  Bytes a = EncodePayload({Kind::kRequest, 1, 1}, 64);
  Bytes b = EncodePayload({Kind::kReply, 2, 99}, 64);
  EXPECT_EQ(Bytes(a.begin() + kHeaderSize, a.end()), Bytes(b.begin() + kHeaderSize, b.end()));
}

struct DecodeRejectCase {
  std::string name;
  std::size_t truncate_to;  // SIZE_MAX: keep all
  std::size_t corrupt_at;   // SIZE_MAX: nothing
  std::uint8_t value;
};

void PrintTo(const DecodeRejectCase& c, std::ostream* os) { *os << c.name; }

class DecodeRejectTest : public ::testing::TestWithParam<DecodeRejectCase> {};

TEST_P(DecodeRejectTest, Rejects) {
  const auto& c = GetParam();
  Bytes p = EncodePayload({Kind::kRequest, 5, 6}, 32);
  if (c.truncate_to != SIZE_MAX) p.resize(c.truncate_to);
  if (c.corrupt_at != SIZE_MAX) p[c.corrupt_at] = c.value;
  EXPECT_FALSE(DecodePayload(p).has_value());
  Bytes before = p;
  EXPECT_FALSE(MakeReply(p));
  EXPECT_EQ(p, before) << "MakeReply must leave what it rejects untouched";
}

INSTANTIATE_TEST_SUITE_P(
    Table, DecodeRejectTest,
    ::testing::Values(DecodeRejectCase{"empty", 0, SIZE_MAX, 0},
                      DecodeRejectCase{"one_byte_short", 15, SIZE_MAX, 0},
                      DecodeRejectCase{"magic_only", 4, SIZE_MAX, 0},
                      DecodeRejectCase{"wrong_magic_first_byte", SIZE_MAX, 0, 'p'},
                      DecodeRejectCase{"wrong_magic_last_byte", SIZE_MAX, 3, 'X'},
                      DecodeRejectCase{"version_0", SIZE_MAX, 4, 0},
                      DecodeRejectCase{"version_2", SIZE_MAX, 4, 2},
                      DecodeRejectCase{"kind_0", SIZE_MAX, 5, 0},
                      DecodeRejectCase{"kind_3", SIZE_MAX, 5, 3}),
    [](const auto& info) { return info.param.name; });

TEST(MakeReplyTest, FlipsAValidRequestOnly) {
  Bytes req = EncodePayload({Kind::kRequest, 300, 0xABCDEF}, 64);
  Bytes data = req;
  ASSERT_TRUE(MakeReply(data));
  auto h = DecodePayload(data);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->kind, Kind::kReply);
  EXPECT_EQ(h->seq, 300);
  EXPECT_EQ(h->token, 0xABCDEFu);
  // Only the kind byte changed.
  for (std::size_t i = 0; i < req.size(); ++i) {
    if (i != 5) {
      EXPECT_EQ(data[i], req[i]) << "byte " << i;
    }
  }
  // A reply is never answered again: two responders cannot echo each other in a loop.
  Bytes reply = data;
  EXPECT_FALSE(MakeReply(data));
  EXPECT_EQ(data, reply);
}

TEST(MakeReplyTest, RejectsArbitraryTraffic) {
  std::string text = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  Bytes data(text.begin(), text.end());
  Bytes before = data;
  EXPECT_FALSE(MakeReply(data));
  EXPECT_EQ(data, before);
}

// --------------------------------------------------------------------------------------------
// The Internet checksum.

struct ChecksumCase {
  std::string name;
  Bytes data;
  std::uint16_t want;
};

void PrintTo(const ChecksumCase& c, std::ostream* os) { *os << c.name; }

class ChecksumTest : public ::testing::TestWithParam<ChecksumCase> {};

TEST_P(ChecksumTest, MatchesReference) {
  const auto& c = GetParam();
  EXPECT_EQ(InternetChecksum(c.data), c.want) << std::hex << InternetChecksum(c.data);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ChecksumTest,
    ::testing::Values(
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (end-around carry); the
        // checksum is its complement.
        ChecksumCase{"rfc1071_example", {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, 0x220d},
        // An odd length is padded with a zero byte: 0001 + f203 + f400 = 1e604 → e605 → 19fa.
        ChecksumCase{"odd_length", {0x00, 0x01, 0xf2, 0x03, 0xf4}, 0x19fa},
        // A textbook IPv4 header (192.168.0.1 → 192.168.0.199) with its checksum field zeroed.
        ChecksumCase{"ipv4_header",
                     {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                      0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7},
                     0xb861},
        ChecksumCase{"empty", {}, 0xffff}, ChecksumCase{"all_ones_word", {0xff, 0xff}, 0x0000},
        // ffff + ffff + 0002 = 20000 → 0002 → fffd.
        ChecksumCase{"end_around_carry", {0xff, 0xff, 0xff, 0xff, 0x00, 0x02}, 0xfffd},
        // ffff + ffff + 0001 = 1ffff → 10000 → 0001 (the fold itself carries) → fffe.
        ChecksumCase{"carry_folds_twice", {0xff, 0xff, 0xff, 0xff, 0x00, 0x01}, 0xfffe}),
    [](const auto& info) { return info.param.name; });

TEST(ChecksumTest, DataWithItsChecksumSumsToZero) {
  Bytes hdr = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
               0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  EXPECT_EQ(InternetChecksum(hdr), 0);
}

// --------------------------------------------------------------------------------------------
// ICMP echo.

Bytes Payload() { return EncodePayload({Kind::kRequest, 9, 0x1122334455667788}, 24); }

TEST(IcmpEchoTest, EncodeV4) {
  Bytes payload = Payload();
  Bytes m = EncodeIcmpEcho(false, 0xBEEF, 0x0102, payload);
  ASSERT_EQ(m.size(), 8 + payload.size());
  EXPECT_EQ(m[0], 8);  // RFC 792 echo request
  EXPECT_EQ(m[1], 0);
  EXPECT_EQ(m[4], 0xBE);
  EXPECT_EQ(m[5], 0xEF);
  EXPECT_EQ(m[6], 0x01);
  EXPECT_EQ(m[7], 0x02);
  EXPECT_EQ(Bytes(m.begin() + 8, m.end()), payload);
  // A correct checksum makes the checksum of the whole message zero.
  EXPECT_EQ(InternetChecksum(m), 0);
}

TEST(IcmpEchoTest, EncodeV4OddPayload) {
  Bytes payload = {1, 2, 3};
  Bytes m = EncodeIcmpEcho(false, 1, 2, payload);
  EXPECT_EQ(InternetChecksum(m), 0);
}

TEST(IcmpEchoTest, EncodeV6LeavesChecksumToTheKernel) {
  Bytes payload = Payload();
  Bytes m = EncodeIcmpEcho(true, 0x0A0B, 0xFFFE, payload);
  ASSERT_EQ(m.size(), 8 + payload.size());
  EXPECT_EQ(m[0], 128);  // RFC 4443 echo request
  EXPECT_EQ(m[1], 0);
  EXPECT_EQ(m[2], 0);
  EXPECT_EQ(m[3], 0);
  EXPECT_EQ(m[4], 0x0A);
  EXPECT_EQ(m[5], 0x0B);
  EXPECT_EQ(m[6], 0xFF);
  EXPECT_EQ(m[7], 0xFE);
  EXPECT_EQ(Bytes(m.begin() + 8, m.end()), payload);
}

// An echo reply as a peer would send it: the request with its type changed.
Bytes ReplyFor(bool v6, std::uint16_t ident, std::uint16_t seq, const Bytes& payload) {
  Bytes m = EncodeIcmpEcho(v6, ident, seq, payload);
  m[0] = v6 ? kIcmp6EchoReply : kIcmpEchoReply;
  return m;
}

// An IPv4 header of `ihl` 32-bit words (options filled with NOPs) in front of `icmp`.
Bytes WithIpv4Header(const Bytes& icmp, int ihl) {
  Bytes out(static_cast<std::size_t>(ihl) * 4, 0x01);
  out[0] = static_cast<std::uint8_t>(0x40 | ihl);
  out[1] = 0;
  std::size_t total = out.size() + icmp.size();
  out[2] = static_cast<std::uint8_t>(total >> 8);
  out[3] = static_cast<std::uint8_t>(total);
  out[8] = 64;  // TTL
  out[9] = 1;   // ICMP
  out.insert(out.end(), icmp.begin(), icmp.end());
  return out;
}

struct ParseCase {
  std::string name;
  bool v6;
  bool with_ip_header;
  Bytes data;
  bool ok;
};

void PrintTo(const ParseCase& c, std::ostream* os) { *os << c.name; }

class ParseIcmpEchoReplyTest : public ::testing::TestWithParam<ParseCase> {};

TEST_P(ParseIcmpEchoReplyTest, Parses) {
  const auto& c = GetParam();
  auto e = ParseIcmpEchoReply(c.v6, c.with_ip_header, c.data);
  ASSERT_EQ(e.has_value(), c.ok);
  if (!c.ok) return;
  EXPECT_EQ(e->ident, 0x4242);
  EXPECT_EQ(e->seq, 0x0307);
  EXPECT_EQ(Bytes(e->payload.begin(), e->payload.end()), Payload());
  // The payload points into the caller's buffer, after the headers.
  EXPECT_EQ(e->payload.data() + e->payload.size(), c.data.data() + c.data.size());
}

Bytes V4Reply() { return ReplyFor(false, 0x4242, 0x0307, Payload()); }
Bytes V6Reply() { return ReplyFor(true, 0x4242, 0x0307, Payload()); }

INSTANTIATE_TEST_SUITE_P(
    Table, ParseIcmpEchoReplyTest,
    ::testing::Values(
        ParseCase{"v4_datagram_socket", false, false, V4Reply(), true},
        ParseCase{"v4_raw_ihl5", false, true, WithIpv4Header(V4Reply(), 5), true},
        ParseCase{"v4_raw_ihl6_options", false, true, WithIpv4Header(V4Reply(), 6), true},
        ParseCase{"v4_raw_ihl15", false, true, WithIpv4Header(V4Reply(), 15), true},
        ParseCase{"v6", true, false, V6Reply(), true},
        ParseCase{"v4_echo_request_rejected", false, false,
                  EncodeIcmpEcho(false, 0x4242, 0x0307, Payload()), false},
        ParseCase{"v4_dest_unreachable_rejected", false, false, WithByte(V4Reply(), 0, 3), false},
        ParseCase{"v4_nonzero_code_rejected", false, false, WithByte(V4Reply(), 1, 1), false},
        ParseCase{"v6_echo_request_rejected", true, false,
                  EncodeIcmpEcho(true, 0x4242, 0x0307, Payload()), false},
        ParseCase{"v6_parser_rejects_v4_reply_type", true, false, V4Reply(), false},
        ParseCase{"v4_parser_rejects_v6_reply_type", false, false, V6Reply(), false},
        ParseCase{"empty", false, false, {}, false},
        ParseCase{"truncated_icmp_header", false, false, Truncated(V4Reply(), 7), false},
        ParseCase{"v6_truncated_icmp_header", true, false, Truncated(V6Reply(), 7), false},
        ParseCase{"raw_empty", false, true, {}, false},
        ParseCase{"raw_truncated_ip_header", false, true,
                  Truncated(WithIpv4Header(V4Reply(), 6), 23), false},
        ParseCase{"raw_truncated_icmp_after_ip_header", false, true,
                  Truncated(WithIpv4Header(V4Reply(), 6), 24 + 7), false},
        ParseCase{"raw_ihl_below_5", false, true, WithByte(WithIpv4Header(V4Reply(), 5), 0, 0x44),
                  false},
        ParseCase{"raw_not_ipv4", false, true, WithByte(WithIpv4Header(V4Reply(), 5), 0, 0x65),
                  false},
        // Without the IP header flag an IPv4 header is not skipped: 0x45 is no echo reply.
        ParseCase{"ip_header_not_expected", false, false, WithIpv4Header(V4Reply(), 5), false}),
    [](const auto& info) { return info.param.name; });

TEST(IcmpEchoTest, HeaderOnlyReplyHasEmptyPayload) {
  Bytes m = ReplyFor(false, 1, 2, {});
  auto e = ParseIcmpEchoReply(false, false, m);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->ident, 1);
  EXPECT_EQ(e->seq, 2);
  EXPECT_TRUE(e->payload.empty());
}

// The prober's one-buffer encoder writes what the two-step encoders write, whatever size the
// buffer last held.
TEST(EncodeRequestTest, SameBytesAsPayloadThenIcmpEcho) {
  Bytes buf;
  for (std::size_t size : {std::size_t{1000}, std::size_t{56}, std::size_t{16}, std::size_t{3}}) {
    Header h{Kind::kRequest, static_cast<std::uint16_t>(size * 7), 0x0102030405060708ULL + size};
    Bytes payload = EncodePayload(h, size);
    EncodeRequest(EchoKind::kUdp, 0x1234, h, size, buf);
    EXPECT_EQ(buf, payload) << "udp, size " << size;
    EncodeRequest(EchoKind::kIcmp4, 0x1234, h, size, buf);
    EXPECT_EQ(buf, EncodeIcmpEcho(false, 0x1234, h.seq, payload)) << "icmp, size " << size;
    EXPECT_EQ(InternetChecksum(buf), 0) << "size " << size;  // RFC 1071: sums to all ones
    EncodeRequest(EchoKind::kIcmp6, 0x1234, h, size, buf);
    EXPECT_EQ(buf, EncodeIcmpEcho(true, 0x1234, h.seq, payload)) << "icmpv6, size " << size;
  }
}

// --------------------------------------------------------------------------------------------
// The identity record (wire/echo.h: AskIdentity, MakeReply with self, ReadIdentity).

Bytes AskingRequest(std::size_t size) {
  Bytes p = EncodePayload({Kind::kRequest, 7, 0xABCDEF}, size);
  EXPECT_TRUE(AskIdentity(p));
  return p;
}

TEST(IdentityTest, ReplyCarriesNodeAndZoneInTheDocumentedLayoutWithoutGrowing) {
  Bytes p = AskingRequest(64);
  Identity self{"node-a", "zone-1", ""};
  ASSERT_TRUE(MakeReply(p, &self));
  ASSERT_EQ(p.size(), 64u);  // never larger than the request
  EXPECT_EQ(std::string(p.begin() + 16, p.begin() + 20), "PNI=");
  EXPECT_EQ(p[20], 6);
  EXPECT_EQ(std::string(p.begin() + 21, p.begin() + 27), "node-a");
  EXPECT_EQ(p[27], 6);
  EXPECT_EQ(std::string(p.begin() + 28, p.begin() + 34), "zone-1");
  EXPECT_EQ(p[34], 34);  // the padding after the record is left as sent
  auto h = DecodePayload(p);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->kind, Kind::kReply);
  EXPECT_EQ(h->seq, 7);
  Identity got;
  ASSERT_EQ(ReadIdentity(p, &got), IdentityRead::kPresent);
  EXPECT_EQ(got, self);
}

TEST(IdentityTest, EmptyZoneRoundTrips) {
  Bytes p = AskingRequest(kIdentityPayloadSize);
  Identity self{"n", "", ""};
  ASSERT_TRUE(MakeReply(p, &self));
  Identity got{"x", "y", ""};
  ASSERT_EQ(ReadIdentity(p, &got), IdentityRead::kPresent);
  EXPECT_EQ(got, self);
}

TEST(IdentityTest, LongestLegalNamesFitTheProbersPayload) {
  Bytes p = AskingRequest(kIdentityPayloadSize);
  Identity self{std::string(253, 'n'), std::string(63, 'z'), ""};
  ASSERT_TRUE(MakeReply(p, &self));
  EXPECT_EQ(p.size(), kIdentityPayloadSize);
  Identity got;
  ASSERT_EQ(ReadIdentity(p, &got), IdentityRead::kPresent);
  EXPECT_EQ(got, self);
}

TEST(IdentityTest, PodPartFollowsTheZoneWhenAskedWithRoom) {
  Bytes p = AskingRequest(64);
  Identity self{"node-a", "zone-1", "podnet-x7"};
  ASSERT_TRUE(MakeReply(p, &self));
  ASSERT_EQ(p.size(), 64u);
  EXPECT_EQ(std::string(p.begin() + 34, p.begin() + 38), "PNIp");
  EXPECT_EQ(p[38], 9);
  EXPECT_EQ(std::string(p.begin() + 39, p.begin() + 48), "podnet-x7");
  EXPECT_EQ(p[48], 48);  // the padding after it is left as sent
  Identity got;
  ASSERT_EQ(ReadIdentity(p, &got), IdentityRead::kPresent);
  EXPECT_EQ(got, self);
  // The longest legal names, Pod too, fit the size discovery asks with.
  Bytes big = AskingRequest(kIdentityPodPayloadSize);
  Identity longest{std::string(253, 'n'), std::string(63, 'z'), std::string(253, 'p')};
  ASSERT_TRUE(MakeReply(big, &longest));
  ASSERT_EQ(ReadIdentity(big, &got), IdentityRead::kPresent);
  EXPECT_EQ(got, longest);
}

TEST(IdentityTest, PodPartThatDoesNotFitIsLeftOutNodeAndZoneStay) {
  // node and zone take 34 bytes; the Pod part 4 + 1 + 9 more: 47 is one byte short.
  for (std::size_t size : {std::size_t{34}, std::size_t{47}, std::size_t{48}}) {
    SCOPED_TRACE(size);
    Bytes p = AskingRequest(size);
    Identity self{"node-a", "zone-1", "podnet-x7"};
    ASSERT_TRUE(MakeReply(p, &self));
    Identity got;
    ASSERT_EQ(ReadIdentity(p, &got), IdentityRead::kPresent);
    EXPECT_EQ(got.node, "node-a");
    EXPECT_EQ(got.pod, size < 48 ? "" : "podnet-x7");
  }
  // A Pod name a label cannot carry is not sent; node and zone still are.
  Bytes p = AskingRequest(kIdentityPodPayloadSize);
  Identity self{"node-a", "zone-1", "pod\nx"};
  ASSERT_TRUE(MakeReply(p, &self));
  Identity got;
  ASSERT_EQ(ReadIdentity(p, &got), IdentityRead::kPresent);
  EXPECT_EQ(got, (Identity{"node-a", "zone-1", ""}));
}

TEST(IdentityTest, RecordThatDoesNotFitIsLeftOutAndTheReplyIsAsBefore) {
  // 16 + 4 + 1 + 6 + 1 + 6 = 34 bytes needed; one byte short, and exactly enough.
  for (std::size_t size : {std::size_t{33}, std::size_t{20}, std::size_t{34}}) {
    SCOPED_TRACE(size);
    Bytes p = AskingRequest(size);
    Bytes want = p;
    want[5] = static_cast<std::uint8_t>(Kind::kReply);
    Identity self{"node-a", "zone-1", ""};
    ASSERT_TRUE(MakeReply(p, &self));
    Identity got;
    if (size < 34) {
      EXPECT_EQ(p, want);
      EXPECT_EQ(ReadIdentity(p, &got), IdentityRead::kAbsent);
    } else {
      EXPECT_EQ(ReadIdentity(p, &got), IdentityRead::kPresent);
    }
  }
  // Too short to ask at all.
  Bytes tiny = EncodePayload({Kind::kRequest, 1, 1}, 19);
  EXPECT_FALSE(AskIdentity(tiny));
}

TEST(IdentityTest, OldProbersAndOldRespondersAreAnsweredAsBefore) {
  // An old prober's padding is the byte pattern: a new responder changes only the kind.
  for (std::size_t size : {std::size_t{16}, std::size_t{56}, std::size_t{1472}}) {
    Bytes p = EncodePayload({Kind::kRequest, 3, 9}, size);
    Bytes want = p;
    want[5] = static_cast<std::uint8_t>(Kind::kReply);
    Identity self{"node-a", "zone-1", ""};
    ASSERT_TRUE(MakeReply(p, &self));
    EXPECT_EQ(p, want);
  }
  // An old responder (no self) echoes the ask: the prober reads "no identity".
  Bytes p = AskingRequest(kIdentityPayloadSize);
  ASSERT_TRUE(MakeReply(p));
  Identity got;
  EXPECT_EQ(ReadIdentity(p, &got), IdentityRead::kAbsent);
}

TEST(IdentityTest, NamesALabelCannotCarryAreNotSent) {
  for (const Identity& bad : {Identity{"node a", "z", ""}, Identity{"n", "zone\n", ""},
                              Identity{std::string(256, 'n'), "", ""}}) {
    Bytes p = AskingRequest(kIdentityPayloadSize);
    ASSERT_TRUE(MakeReply(p, &bad));
    Identity got;
    EXPECT_EQ(ReadIdentity(p, &got), IdentityRead::kAbsent) << bad.node << "/" << bad.zone;
  }
}

// A hostile or broken responder: lengths past the end, names with bytes a label must not get.
TEST(IdentityTest, HostileRecordsAreMalformedNeverOutOfBounds) {
  auto record = [](std::initializer_list<std::uint8_t> tail) {
    Bytes p = EncodePayload({Kind::kReply, 1, 1}, 16);
    for (std::uint8_t b : {'P', 'N', 'I', '='}) p.push_back(b);
    p.insert(p.end(), tail);
    return p;
  };
  struct Case {
    const char* name;
    Bytes data;
  };
  for (const Case& c : {
           Case{"no node length", record({})},
           Case{"node length past the end", record({5, 'a', 'b'})},
           Case{"node length 255, 1 byte", record({255, 'a'})},
           Case{"no zone length", record({1, 'a'})},
           Case{"zone length past the end", record({1, 'a', 3, 'z'})},
           Case{"node with a newline", record({2, 'a', '\n', 0})},
           Case{"zone with a quote", record({1, 'a', 1, '"'})},
           Case{"zone with a NUL", record({1, 'a', 1, 0})},
           Case{"zone with a terminal escape", record({1, 'a', 4, 0x1b, '[', '2', 'J'})},
           Case{"node not UTF-8", record({2, 0xff, 0xfe, 0})},
           Case{"node with a C1 CSI", record({3, 0xc2, 0x9b, 'm', 0})},
           Case{"no Pod length", record({1, 'a', 0, 'P', 'N', 'I', 'p'})},
           Case{"Pod length past the end", record({1, 'a', 0, 'P', 'N', 'I', 'p', 4, 'p'})},
           Case{"empty Pod", record({1, 'a', 0, 'P', 'N', 'I', 'p', 0})},
           Case{"Pod with a newline", record({1, 'a', 0, 'P', 'N', 'I', 'p', 2, 'p', '\n'})},
       }) {
    Identity got;
    EXPECT_EQ(ReadIdentity(c.data, &got), IdentityRead::kMalformed) << c.name;
  }
  Identity got;
  EXPECT_EQ(ReadIdentity(record({1, 'a', 0}), &got), IdentityRead::kPresent);
  EXPECT_EQ(got, (Identity{"a", "", ""}));
  // Bytes after the zone that are not the Pod marker are padding, as before.
  EXPECT_EQ(ReadIdentity(record({1, 'a', 0, 'P', 'N', 'I'}), &got), IdentityRead::kPresent);
  EXPECT_EQ(got, (Identity{"a", "", ""}));
}

TEST(MtuRecordTest, AckAnswersALargeRequestSmallWithTheBytesReceived) {
  Bytes req = EncodePayload({Kind::kRequest, 9, 0xAB}, 8973);
  ASSERT_TRUE(AskMtu(req, MtuMode::kAck, 0));
  auto ask = ReadMtuAsk(req);
  ASSERT_TRUE(ask.has_value());
  EXPECT_EQ(ask->mode, MtuMode::kAck);
  // Layout: "PNM?", mode, flags, size right after the header.
  EXPECT_EQ(Bytes(req.begin() + 16, req.begin() + 24), (Bytes{'P', 'N', 'M', '?', 1, 0, 0, 0}));
  ASSERT_TRUE(MakeReply(req));
  ASSERT_EQ(MakeMtuAnswer(req, req.size(), *ask), kMtuAckBytes);
  Bytes reply(req.begin(), req.begin() + kMtuAckBytes);
  EXPECT_EQ(DecodePayload(reply)->kind, Kind::kReply);
  EXPECT_EQ(DecodePayload(reply)->seq, 9);
  auto answer = ReadMtuAnswer(reply);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->mode, MtuMode::kAck);
  EXPECT_EQ(answer->size, 8973);
  EXPECT_FALSE(ReadMtuAsk(reply).has_value());
}

TEST(MtuRecordTest, ReturnSendsTheRequestBackWholeOrSaysTooBig) {
  Bytes req = EncodePayload({Kind::kRequest, 7, 3}, 8973);
  ASSERT_TRUE(AskMtu(req, MtuMode::kReturn, 8973));
  ASSERT_TRUE(MakeReply(req));
  auto ask = ReadMtuAsk(req);
  ASSERT_TRUE(ask.has_value());
  ASSERT_EQ(MakeMtuAnswer(req, req.size(), *ask), 8973u);
  auto answer = ReadMtuAnswer(req);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->mode, MtuMode::kReturn);
  EXPECT_EQ(answer->size, 8973);
  EXPECT_EQ(answer->flags, 0);
  EXPECT_EQ(DecodePayload(req)->seq, 7);
  ask->flags |= kMtuTooBig;
  ASSERT_EQ(MakeMtuAnswer(req, req.size(), *ask), kMtuAckBytes);
  EXPECT_EQ(ReadMtuAnswer(req)->flags, kMtuTooBig);
}

// A reply is never larger than its request: a small request asking for a large reply (what a
// reflection attack is built on) gets nothing, even with room in the buffer.
TEST(MtuRecordTest, ReturnRefusesAReplyLargerThanTheRequest) {
  Bytes buf(9000);
  Bytes req = EncodePayload({Kind::kRequest, 3, 7}, 1125);
  ASSERT_TRUE(AskMtu(req, MtuMode::kReturn, 1126));
  std::copy(req.begin(), req.end(), buf.begin());
  ASSERT_TRUE(MakeReply(std::span(buf.data(), req.size())));
  auto ask = ReadMtuAsk(std::span(buf.data(), req.size()));
  ASSERT_TRUE(ask.has_value());
  EXPECT_EQ(MakeMtuAnswer(buf, req.size(), *ask), 0u);
  ask->size = 1125;
  EXPECT_EQ(MakeMtuAnswer(buf, req.size(), *ask), 1125u) << "the request's own size";
  ask->size = kMtuAckBytes - 1;
  EXPECT_EQ(MakeMtuAnswer(buf, req.size(), *ask), 0u) << "no room for the record";
}

TEST(MtuRecordTest, RequestsWithoutTheRecordAndHostileRecordsAreNotMtuAsks) {
  EXPECT_FALSE(ReadMtuAsk(EncodePayload({Kind::kRequest, 1, 1}, 56)).has_value())
      << "an RTT probe's padding is the byte pattern, never the record";
  Bytes req = EncodePayload({Kind::kRequest, 1, 1}, 56);
  ASSERT_TRUE(AskMtu(req, MtuMode::kAck, 0));
  EXPECT_FALSE(ReadMtuAsk(Truncated(req, kMtuAckBytes - 1)).has_value());
  EXPECT_FALSE(ReadMtuAsk(WithByte(req, 20, 3)).has_value()) << "unknown mode";
  Bytes tiny = EncodePayload({Kind::kRequest, 1, 1}, 20);
  EXPECT_FALSE(AskMtu(tiny, MtuMode::kAck, 0));
}

}  // namespace
}  // namespace podnet::wire::echo
