#include "exporter/probes/dns/answer.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace podnet::probes::dns {

namespace {

constexpr std::uint16_t kTypeA = 1, kTypeCname = 5, kTypeAaaa = 28, kClassIn = 1;

std::uint8_t At(std::string_view m, std::size_t i) {
  return i < m.size() ? static_cast<std::uint8_t>(m[i]) : 0;
}
std::uint16_t U16(std::string_view m, std::size_t i) {
  return static_cast<std::uint16_t>(At(m, i) << 8 | At(m, i + 1));
}

// resolv/ns_name.c ns_name_unpack: the labels of the name at `at` (pointers followed),
// and the bytes it takes at `at`; nullopt where glibc's unpack fails (-1).
struct Unpacked {
  std::vector<std::string_view> labels;
  std::size_t wire = 0;
};
std::optional<Unpacked> Unpack(std::string_view m, std::size_t at) {
  Unpacked u;
  std::size_t p = at, total = 0, seen = 0;
  bool jumped = false;
  while (true) {
    if (p >= m.size()) return std::nullopt;
    std::uint8_t n = At(m, p);
    if ((n & 0xc0) == 0xc0) {
      if (p + 1 >= m.size()) return std::nullopt;
      if (!jumped) u.wire = p + 2 - at;
      jumped = true;
      p = static_cast<std::size_t>((n & 0x3f) << 8 | At(m, p + 1));
      seen += 2;
      if (seen >= m.size()) return std::nullopt;  // a loop
      continue;
    }
    if (n & 0xc0) return std::nullopt;  // extended label types
    if (n == 0) {
      if (!jumped) u.wire = p + 1 - at;
      return total + 1 > 255 ? std::nullopt : std::optional<Unpacked>(std::move(u));
    }
    if (p + 1 + n > m.size()) return std::nullopt;
    total += n + 1;
    u.labels.push_back(m.substr(p + 1, n));
    p += 1 + n;
  }
}

// resolv/ns_samebinaryname.c: same labels, ASCII letters in any case.
bool SameName(const Unpacked& a, const Unpacked& b) {
  if (a.labels.size() != b.labels.size()) return false;
  for (std::size_t i = 0; i < a.labels.size(); ++i) {
    std::string_view x = a.labels[i], y = b.labels[i];
    if (x.size() != y.size()) return false;
    for (std::size_t k = 0; k < x.size(); ++k) {
      auto up = [](unsigned char c) { return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c; };
      if (up(static_cast<unsigned char>(x[k])) != up(static_cast<unsigned char>(y[k])))
        return false;
    }
  }
  return true;
}

// resolv/res-name-checking.c __res_binary_hnok: labels of letters, digits, '-' and '_', the
// first not starting with '-'.
bool HostName(const Unpacked& n) {
  if (!n.labels.empty() && n.labels.front().front() == '-') return false;
  for (std::string_view l : n.labels) {
    for (unsigned char c : l) {
      bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                c == '-' || c == '_';
      if (!ok) return false;
    }
  }
  return true;
}

// The presentation form's bytes with its NUL (ns_name_ntop; host names need no escapes).
std::size_t TextBytes(const Unpacked& n) {
  std::size_t len = 0;
  for (std::string_view l : n.labels) len += l.size() + 1;
  return std::max<std::size_t>(len, 1) + (n.labels.empty() ? 1 : 0);
}

// glibc's alloc_buffer over getaddrinfo's scratch buffer (include/alloc_buffer.h): a failed
// allocation marks the buffer failed for good.
struct AllocBuffer {
  std::size_t off = 0, size = 0;  // from the buffer's start (malloc/max_align_t aligned)
  bool failed = false;
  void Alloc(std::size_t bytes, std::size_t align) {
    std::size_t at = (off + align - 1) / align * align;
    if (failed || at + bytes > size) {
      failed = true;
      return;
    }
    off = at + bytes;
  }
};
constexpr std::size_t kTuple = 40, kTupleAlign = 8;  // struct gaih_addrtuple, LP64

enum class Slice { kSuccess, kNotFound, kUnavail };

// resolv/nss_dns/dns-host.c gaih_getanswer_slice (release/2.36, Debian 12's 2.36-9).
Slice ReadSlice(std::string_view m, AllocBuffer& buf, bool store_canon) {
  // ns_rr_cursor_init: a header, QDCOUNT 1, an uncompressed question name, type and class.
  if (m.size() < 12 || U16(m, 4) != 1) return Slice::kUnavail;
  auto qname = Unpack(m, 12);
  if (!qname || (At(m, 12) & 0xc0) || 12 + qname->wire + 4 > m.size()) return Slice::kUnavail;
  std::uint16_t qtype = U16(m, 12 + qname->wire);
  std::size_t cp = 12 + qname->wire + 4;
  int ancount = U16(m, 6);
  if (ancount == 0 || !HostName(*qname)) return Slice::kNotFound;
  Unpacked expected = *qname;
  std::optional<Unpacked> canon = *qname;  // the name the first tuple carries
  bool have = false;
  for (; ancount > 0; --ancount) {
    auto owner = Unpack(m, cp);  // ns_rr_cursor_next
    if (!owner || cp + owner->wire + 10 > m.size()) return Slice::kUnavail;
    cp += owner->wire;
    std::uint16_t type = U16(m, cp), rdlen = U16(m, cp + 8);
    cp += 10;
    if (m.size() - cp < rdlen) return Slice::kUnavail;
    std::size_t rdata = cp;
    cp += rdlen;
    if (type == kTypeCname) {  // no owner check; the target is the name to expect next
      auto target = Unpack(m, rdata);
      if (!target) return Slice::kUnavail;
      expected = *target;
      if (store_canon && HostName(*target)) canon = *target;
      continue;
    }
    if (type != qtype || !SameName(*owner, expected) ||
        rdlen != (qtype == kTypeA      ? 4
                  : qtype == kTypeAaaa ? 16
                                       : 0))
      continue;
    buf.Alloc(kTuple, kTupleAlign);
    if (buf.failed) continue;  // reported by the caller (the ERANGE protocol)
    if (store_canon && canon) {
      buf.Alloc(TextBytes(*canon), 1);  // alloc_buffer_copy_string
      store_canon = false;
    }
    have = true;
  }
  return have ? Slice::kSuccess : Slice::kNotFound;
}

// src/network/dns_parse.c __dns_parse + lookup_name.c dns_parse_callback, musl 1.2.3.
void MuslParse(std::string_view r, int& cnt) {
  constexpr int kMaxAddrs = 48;
  if (r.size() < 12 || (At(r, 3) & 15) != 0) return;
  int qdcount = U16(r, 4), ancount = U16(r, 6);
  if (qdcount + ancount > 64) return;
  std::size_t p = 12, rlen = r.size();
  auto skip_name = [&]() {
    while (p < rlen && At(r, p) - 1U < 127) ++p;
    return !(At(r, p) > 193 || (At(r, p) == 193 && At(r, p + 1) > 254) || p + 6 > rlen);
  };
  while (qdcount--) {
    if (!skip_name()) return;
    p += 5 + (At(r, p) != 0);
  }
  while (ancount--) {
    if (!skip_name()) return;
    p += 1 + (At(r, p) != 0);
    std::size_t len = U16(r, p + 8);
    if (p + len > rlen) return;  // musl checks p, not p + 10
    if (cnt >= kMaxAddrs) return;
    std::uint8_t type = At(r, p + 1);  // the type's low byte
    if (type == kTypeA || type == kTypeAaaa) {
      if (len != (type == kTypeA ? 4U : 16U)) return;
      ++cnt;
    }
    p += 10 + len;
  }
}

}  // namespace

GlibcVerdict GlibcReadAnswers(std::string_view first, std::string_view second, std::size_t buflen) {
  AllocBuffer buf;
  buf.size = buflen;
  Slice status = Slice::kNotFound;
  if (!first.empty()) {
    status = ReadSlice(first, buf, true);
    if (buf.failed) return GlibcVerdict::kTooSmall;
  }
  if ((status == Slice::kSuccess || status == Slice::kNotFound) && !second.empty()) {
    Slice s2 = ReadSlice(second, buf, status != Slice::kSuccess);
    if (status != Slice::kSuccess && s2 != Slice::kNotFound) status = s2;
  }
  if (buf.failed) return GlibcVerdict::kTooSmall;
  return status == Slice::kSuccess ? GlibcVerdict::kAddresses : GlibcVerdict::kNoAddress;
}

int MuslAddresses(std::string_view a, std::string_view aaaa) {
  int cnt = 0;
  MuslParse(a, cnt);
  MuslParse(aaaa, cnt);
  return cnt;
}

std::string MakeAnswer(std::string_view qname, std::uint16_t qtype, int rcode, int records,
                       bool truncated) {
  auto u16 = [](std::string& s, unsigned v) {
    s += static_cast<char>(v >> 8 & 0xff);
    s += static_cast<char>(v & 0xff);
  };
  std::string m;
  u16(m, 0);
  u16(m, 0x8180u | (truncated ? 0x0200u : 0u) | (static_cast<unsigned>(rcode) & 0x0fu));
  u16(m, 1);
  u16(m, static_cast<unsigned>(records));
  u16(m, 0);
  u16(m, 0);
  if (!qname.empty() && qname.back() == '.') qname.remove_suffix(1);
  while (!qname.empty()) {
    std::size_t dot = qname.find('.');
    std::string_view label = qname.substr(0, dot);
    m += static_cast<char>(label.size());
    m.append(label);
    qname = dot == std::string_view::npos ? std::string_view() : qname.substr(dot + 1);
  }
  m += '\0';
  u16(m, qtype);
  u16(m, kClassIn);
  for (int i = 0; i < records; ++i) {
    u16(m, 0xc00c);
    u16(m, qtype);
    u16(m, kClassIn);
    u16(m, 0);
    u16(m, 30);
    if (qtype == kTypeAaaa) {
      u16(m, 16);
      u16(m, 0xfd00);
      m.append(12, '\0');
      u16(m, static_cast<unsigned>(i));
    } else {
      u16(m, 4);
      u16(m, 0x0a00);
      u16(m, static_cast<unsigned>(i));
    }
  }
  return m;
}

}  // namespace podnet::probes::dns
