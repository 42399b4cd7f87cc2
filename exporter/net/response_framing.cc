#include "exporter/net/response_framing.h"

#include <algorithm>
#include <vector>

namespace podnet::net::http_client {

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

namespace {

// The head's lines without their terminators (LF, and a CR before it), the empty last one left
// out.
std::vector<std::string_view> HeadLines(std::string_view head) {
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
  return lines;
}

// What the framing fields of a head say (the fields after the start line, their obs-fold
// continuation lines joined to them, RFC 9112 §5.2).
struct FramingFields {
  bool te = false;                      // a Transfer-Encoding field
  bool only_chunked = true;             // every coding it lists is chunked
  std::size_t codings = 0;              // codings listed, empty elements left out
  std::optional<std::uint64_t> length;  // the Content-Length
  bool bad_length = false, differing_lengths = false;
  std::vector<bool> is_length_line;  // lines[i] is (part of) a Content-Length field
};

FramingFields ScanFraming(const std::vector<std::string_view>& lines) {
  FramingFields f;
  f.is_length_line.assign(lines.size(), false);
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
      f.te = true;
      for (auto c : ListElements(value)) {
        if (c.empty()) continue;  // RFC 9110 §5.6.1: empty list elements do not count
        ++f.codings;
        f.only_chunked = f.only_chunked && EqualsIgnoringCase(c, "chunked");
      }
    } else if (colon != std::string_view::npos && EqualsIgnoringCase(name, "content-length")) {
      for (std::size_t k = i; k < end; ++k) f.is_length_line[k] = true;
      for (auto e : ListElements(value)) {
        auto v = DecimalLength(e);
        if (!v) {
          f.bad_length = true;
        } else if (f.length && *f.length != *v) {
          f.differing_lengths = true;
        } else {
          f.length = v;
        }
      }
    }
    i = end;
  }
  return f;
}

}  // namespace

Head NormalizeHead(std::string_view head) {
  std::vector<std::string_view> lines = HeadLines(head);
  Head out;
  bool http10 = !lines.empty() && lines[0].starts_with("HTTP/1.0");
  FramingFields f = ScanFraming(lines);
  bool chunked = f.te && f.codings == 1 && f.only_chunked;
  if (f.te && (http10 || !chunked)) {
    out.verdict = Head::Verdict::kAmbiguous;
    return out;
  }
  if (!f.te && f.bad_length) {
    out.verdict = Head::Verdict::kMalformed;
    return out;
  }
  if (!f.te && f.differing_lengths) {
    out.verdict = Head::Verdict::kAmbiguous;
    return out;
  }
  if (chunked) {
    out.framing = BodyFraming::kChunked;
  } else if (f.length) {
    out.framing = BodyFraming::kLength;
    out.length = *f.length;
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (chunked && f.is_length_line[i]) continue;
    out.normalized.append(lines[i]).append("\r\n");
  }
  out.normalized.append("\r\n");
  return out;
}

ChunkedDecoder::Status ChunkedDecoder::SizeDigit(char c, std::size_t& i) {
  int h = HexValue(c);
  if (h >= 0) {
    if (++line_ > kMaxHeaderBytes) return Status::kMalformed;
    if (size_ > (UINT64_MAX >> 4)) return Status::kMalformed;
    size_ = size_ * 16 + static_cast<std::uint64_t>(h);
    digits_ = true;
    ++i;
    return Status::kMore;
  }
  // After the size: a chunk extension (RFC 9112 §7.1.1, BWS ";" ...) or the line's end.
  if (!digits_ || !(c == ';' || IsOws(c) || c == '\r' || c == '\n')) return Status::kMalformed;
  state_ = State::kExtension;
  return Status::kMore;  // the same byte, read as the rest of the line
}

ChunkedDecoder::Status ChunkedDecoder::SizeLineEnd(char c, std::size_t& i) {
  if (++line_ > kMaxHeaderBytes) return Status::kMalformed;
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
    return Status::kMalformed;  // a CR not before LF
  } else {
    cr_ = c == '\r';
  }
  return Status::kMore;
}

ChunkedDecoder::Status ChunkedDecoder::TrailerByte(char c, std::size_t& i) {
  if (++trailer_ > kMaxHeaderBytes) return Status::kMalformed;
  ++i;
  if (c == '\n') {
    cr_ = false;
    if (trailer_line_ == 0) return Status::kDone;
    trailer_line_ = 0;
  } else if (cr_) {
    return Status::kMalformed;
  } else if (c == '\r') {
    cr_ = true;
  } else {
    ++trailer_line_;
  }
  return Status::kMore;
}

ChunkedDecoder::Status ChunkedDecoder::Step(std::string_view in, std::size_t& i) {
  char c = in[i];
  switch (state_) {
    case State::kSize:
      return SizeDigit(c, i);
    case State::kExtension:
      return SizeLineEnd(c, i);
    case State::kData: {
      std::size_t n = static_cast<std::size_t>(
          std::min<std::uint64_t>(size_, static_cast<std::uint64_t>(in.size() - i)));
      i += n;
      size_ -= n;
      if (size_ == 0) state_ = State::kDataCr;
      return Status::kMore;
    }
    case State::kDataCr:
      if (c != '\r') return Status::kMalformed;  // python's http.client and Go: CRLF, no bare LF
      ++i;
      state_ = State::kDataLf;
      return Status::kMore;
    case State::kDataLf:
      if (c != '\n') return Status::kMalformed;
      ++i;
      state_ = State::kSize;
      return Status::kMore;
    case State::kTrailer:
      return TrailerByte(c, i);
  }
  return Status::kMore;
}

ChunkedDecoder::Status ChunkedDecoder::Feed(std::string_view in, std::size_t* consumed) {
  std::size_t i = 0;
  Status status = Status::kMore;
  while (i < in.size() && status == Status::kMore) status = Step(in, i);
  *consumed = i;
  return status;
}

}  // namespace podnet::net::http_client
