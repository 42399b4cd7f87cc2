#include "exporter/probes/http_client/response_framing.h"

#include <algorithm>
#include <vector>

namespace podnet::probes::http_client {

namespace {

bool IsOws(char c) { return c == ' ' || c == '\t'; }

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && IsOws(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsOws(s.back())) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

// The elements of a comma-separated list (RFC 9110 §5.6.1), OWS trimmed; empty ones kept, so
// that the caller decides about them.
std::vector<std::string_view> ListElements(std::string_view value) {
  std::vector<std::string_view> out;
  for (;;) {
    auto comma = value.find(',');
    out.push_back(TrimOws(value.substr(0, comma)));
    if (comma == std::string_view::npos) return out;
    value.remove_prefix(comma + 1);
  }
}

// 1*DIGIT that fits in 63 bits (RFC 9110 §8.6).
std::optional<std::uint64_t> DecimalLength(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::size_t> HeaderLength(std::string_view data) {
  std::size_t start = 0;
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] != '\n') continue;
    std::size_t len = i - start;
    // The start line is never the empty line that ends the section.
    if (start > 0 && (len == 0 || (len == 1 && data[start] == '\r'))) return i + 1;
    start = i + 1;
  }
  return std::nullopt;
}

Head NormalizeHead(std::string_view head) {
  // Lines without their terminator (LF, and a CR before it); the last is the empty line.
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    auto lf = head.find('\n');
    std::string_view line = head.substr(0, lf);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (lf == std::string_view::npos) break;
    head.remove_prefix(lf + 1);
  }
  if (!lines.empty() && lines.back().empty()) lines.pop_back();

  Head out;
  bool http10 = !lines.empty() && lines[0].starts_with("HTTP/1.0");
  bool te = false, only_chunked = true;
  std::size_t codings = 0;
  std::optional<std::uint64_t> length;
  bool bad_length = false, differing_lengths = false;
  std::vector<bool> is_length_line(lines.size(), false);
  // The fields, their obs-fold continuation lines (RFC 9112 §5.2) joined to them.
  for (std::size_t i = 1; i < lines.size();) {
    std::size_t end = i + 1;
    while (end < lines.size() && !lines[end].empty() && IsOws(lines[end][0])) ++end;
    std::string_view line = lines[i];
    auto colon = line.find(':');
    std::string_view name = line.substr(0, colon);
    std::string value(colon == std::string_view::npos ? "" : line.substr(colon + 1));
    for (std::size_t k = i + 1; k < end; ++k) value += " " + std::string(TrimOws(lines[k]));
    if (colon != std::string_view::npos && EqualsIgnoringCase(name, "transfer-encoding")) {
      te = true;
      for (auto c : ListElements(value)) {
        if (c.empty()) continue;  // RFC 9110 §5.6.1: empty list elements do not count
        ++codings;
        only_chunked = only_chunked && EqualsIgnoringCase(c, "chunked");
      }
    } else if (colon != std::string_view::npos && EqualsIgnoringCase(name, "content-length")) {
      for (std::size_t k = i; k < end; ++k) is_length_line[k] = true;
      for (auto e : ListElements(value)) {
        auto v = DecimalLength(e);
        if (!v) {
          bad_length = true;
        } else if (length && *length != *v) {
          differing_lengths = true;
        } else {
          length = v;
        }
      }
    }
    i = end;
  }

  bool chunked = te && codings == 1 && only_chunked;
  if (te && (http10 || !chunked)) {
    out.verdict = Head::Verdict::kAmbiguous;
    return out;
  }
  if (!te && bad_length) {
    out.verdict = Head::Verdict::kMalformed;
    return out;
  }
  if (!te && differing_lengths) {
    out.verdict = Head::Verdict::kAmbiguous;
    return out;
  }
  if (chunked) {
    out.framing = BodyFraming::kChunked;
  } else if (length) {
    out.framing = BodyFraming::kLength;
    out.length = *length;
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (chunked && is_length_line[i]) continue;
    out.normalized.append(lines[i]).append("\r\n");
  }
  out.normalized.append("\r\n");
  return out;
}

ChunkedDecoder::Status ChunkedDecoder::Feed(std::string_view in, std::size_t* consumed) {
  std::size_t i = 0;
  auto malformed = [&] {
    *consumed = i;
    return Status::kMalformed;
  };
  while (i < in.size()) {
    char c = in[i];
    switch (state_) {
      case State::kSize: {
        int h = HexValue(c);
        if (h >= 0) {
          if (++line_ > kMaxHeaderBytes) return malformed();
          if (size_ > (UINT64_MAX >> 4)) return malformed();
          size_ = size_ * 16 + static_cast<std::uint64_t>(h);
          digits_ = true;
          ++i;
          break;
        }
        // After the size: a chunk extension (RFC 9112 §7.1.1, BWS ";" ...) or the line's end.
        if (!digits_ || !(c == ';' || IsOws(c) || c == '\r' || c == '\n')) return malformed();
        state_ = State::kExtension;
        break;  // the same byte, read as the rest of the line
      }
      case State::kExtension:
        if (++line_ > kMaxHeaderBytes) return malformed();
        ++i;
        if (c == '\n') {
          cr_ = false;
          line_ = 0;
          digits_ = false;
          announced_ += size_;
          if (size_ == 0) {
            state_ = State::kTrailer;
          } else {
            state_ = State::kData;
          }
        } else if (cr_) {
          return malformed();  // a CR not before LF
        } else {
          cr_ = c == '\r';
        }
        break;
      case State::kData: {
        std::size_t n = static_cast<std::size_t>(
            std::min<std::uint64_t>(size_, static_cast<std::uint64_t>(in.size() - i)));
        i += n;
        size_ -= n;
        if (size_ == 0) state_ = State::kDataCr;
        break;
      }
      case State::kDataCr:
        if (c != '\r') return malformed();  // python's http.client and Go: CRLF, no bare LF
        ++i;
        state_ = State::kDataLf;
        break;
      case State::kDataLf:
        if (c != '\n') return malformed();
        ++i;
        state_ = State::kSize;
        break;
      case State::kTrailer:
        if (++trailer_ > kMaxHeaderBytes) return malformed();
        ++i;
        if (c == '\n') {
          cr_ = false;
          if (trailer_line_ == 0) {
            *consumed = i;
            return Status::kDone;
          }
          trailer_line_ = 0;
        } else if (cr_) {
          return malformed();
        } else if (c == '\r') {
          cr_ = true;
        } else {
          ++trailer_line_;
        }
        break;
    }
  }
  *consumed = i;
  return Status::kMore;
}

}  // namespace podnet::probes::http_client
