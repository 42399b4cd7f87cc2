#include "exporter/topology/safe_text.h"

#include <algorithm>

namespace podnet::topology {
namespace {

constexpr std::string_view kMarker = "\xE2\x80\xA6";  // U+2026 HORIZONTAL ELLIPSIS

// The length of the well-formed UTF-8 sequence at s[i] (Unicode table 3-7), 0 when there is
// none (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short).
std::size_t SequenceAt(std::string_view s, std::size_t i) {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  auto cont = [&](std::size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return i + k < s.size() && b(k) >= lo && b(k) <= hi;
  };
  unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    return cont(1, lo, hi) && cont(2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

bool Plain(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) { return ch >= 0x20 && ch < 0x7F; });
}

void AppendHex(std::string& out, const char* prefix, unsigned v) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += prefix;
  out += kHex[(v >> 4) & 0xF];
  out += kHex[v & 0xF];
}

}  // namespace

std::string SafeText(std::string_view in, std::size_t max_bytes, TextRepairs* repairs) {
  if (in.size() <= max_bytes && Plain(in)) return std::string(in);  // the common case
  std::string out;
  out.reserve(std::min(in.size(), max_bytes) + kMarker.size());
  // Where to cut if the text turns out too long: the last piece boundary that leaves room for
  // the marker.
  std::size_t room = max_bytes >= kMarker.size() ? max_bytes - kMarker.size() : 0;
  std::size_t cut = 0;
  bool escaped = false;
  std::size_t i = 0;
  while (i < in.size() && out.size() <= max_bytes) {
    if (out.size() <= room) cut = out.size();
    auto c = static_cast<unsigned char>(in[i]);
    std::size_t n = SequenceAt(in, i);
    if (n == 0 || c < 0x20 || c == 0x7F) {
      AppendHex(out, "\\x", c);  // a control character or a byte outside UTF-8
      escaped = true;
      ++i;
    } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(in[i + 1]) < 0xA0) {
      AppendHex(out, "\\u00", static_cast<unsigned char>(in[i + 1]));  // C1: U+0080–U+009F
      escaped = true;
      i += 2;
    } else {
      out.append(in.substr(i, n));
      i += n;
    }
  }
  bool truncated = i < in.size() || out.size() > max_bytes;
  if (truncated) {
    if (out.size() <= room) cut = out.size();
    out.resize(cut);
    if (max_bytes >= kMarker.size()) out += kMarker;
  }
  if (repairs) {
    repairs->truncated += truncated;
    repairs->escaped += escaped;
  }
  return out;
}

}  // namespace podnet::topology
