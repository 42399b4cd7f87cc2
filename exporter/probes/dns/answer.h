#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

// How each C library reads the answers of the name its walk ended on: which addresses it finds,
// and (glibc) whether they fit the buffer getaddrinfo lent it. The walk decides which questions
// go out (resolver_model.h); this decides what getaddrinfo returns from the replies in hand.

namespace podnet::probes::dns {

/// getaddrinfo's first buffer for nss_dns: a scratch buffer of 1,024 bytes
/// (include/scratch_buffer.h), doubled by scratch_buffer_grow each time nss_dns answers
/// NSS_STATUS_TRYAGAIN with ERANGE (sysdeps/posix/getaddrinfo.c, gaih_inet), glibc 2.36.
inline constexpr std::size_t kGlibcFirstBuffer = 1024;

/// What glibc 2.36's nss_dns makes of a name's answers, as getaddrinfo then reports it.
enum class GlibcVerdict {
  kAddresses,  // NSS_STATUS_SUCCESS: at least one address → getaddrinfo returns 0
  kNoAddress,  // NOTFOUND / UNAVAIL (no address of the asked type under the asked name or its
               // CNAME target; a record that does not parse) → EAI_NONAME
  kTooSmall,   // the buffer ran out (TRYAGAIN + ERANGE): getaddrinfo doubles it and runs the
               // whole lookup again (every question of the walk, from its first name)
};

/// resolv/nss_dns/dns-host.c gaih_getanswer over `buflen` bytes of buffer, as Debian 12's
/// glibc 2.36 (the release/2.36 branch, whose nss_dns has the rewritten
/// _nss_dns_gethostbyname4_r and gaih_getanswer_slice) has it. `first` and `second` are whole
/// DNS messages (header included) in the order they arrived (res_send.c send_dg/send_vc put
/// the first reply in the first buffer, whichever question it answers); `second` empty under
/// no-aaaa. Per answer record: a CNAME makes its target the name to expect (no owner check);
/// a record of the question's type under the expected name with the right RDATA length takes
/// a 40-byte gaih_addrtuple (8-byte aligned, LP64), and the first one also the canonical name
/// as text (the question name, or the last CNAME target that is a host name); other records
/// are skipped; a record that does not parse ends the slice (NO_RECOVERY). A buffer that runs
/// out in the first message is ERANGE at once; the second message is read only after SUCCESS
/// or NOTFOUND.
GlibcVerdict GlibcReadAnswers(std::string_view first, std::string_view second, std::size_t buflen);

/// musl 1.2.3's count of addresses in a name's answers (src/network/lookup_name.c
/// name_from_dns: __dns_parse of the A reply, then AAAA's, into dns_parse_callback):
/// records whose type's low byte is 1 (A, RDATA 4 bytes) or 28 (AAAA, 16 bytes), any class;
/// a record with another RDATA length, a name __dns_parse cannot skip, or one that runs past
/// the message ends that message's parse (the addresses before it stay); a message with
/// QDCOUNT + ANCOUNT over 64 gives none; at most 48 (MAXADDRS) in all.
/// 0 → getaddrinfo returns EAI_NONAME ("Name does not resolve"), even with a CNAME.
int MuslAddresses(std::string_view a, std::string_view aaaa);

/// A well-formed response for scripted replies: the question (`qname`, `qtype`, class IN,
/// RD RA, `rcode`, TC when `truncated`), then `records` answers of `qtype` owned by the
/// question name (a compression pointer), TTL 30, addresses 10.0.x.y / fd00::x:y.
std::string MakeAnswer(std::string_view qname, std::uint16_t qtype, int rcode, int records,
                       bool truncated = false);

}  // namespace podnet::probes::dns
