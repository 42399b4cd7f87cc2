// The HTTP probe's response framing (exporter/net/response_framing.h): whatever a
// peer answers, the header section is found within kMaxHeaderBytes or not at all, a normalized one
// has CRLF line ends only, and the rest read as a chunked body is decoded the same whether it
// comes in one piece or byte by byte (the probe reads it in pieces as they arrive).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "exporter/net/response_framing.h"

namespace http = podnet::net::http_client;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto n = http::HeaderLength(in.substr(0, http::kMaxHeaderBytes))) {
    if (*n > http::kMaxHeaderBytes) __builtin_trap();
    http::Head head = http::NormalizeHead(in.substr(0, *n));
    if (head.verdict == http::Head::Verdict::kOk) {
      const std::string& s = head.normalized;
      if (s.size() < 4 || s.substr(s.size() - 4) != "\r\n\r\n") __builtin_trap();
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\n' && (i == 0 || s[i - 1] != '\r')) __builtin_trap();
      }
    }
    in.remove_prefix(*n);
  }
  http::ChunkedDecoder whole, bytewise;
  std::size_t used = 0, total = 0;
  auto status = whole.Feed(in, &used);
  auto s = http::ChunkedDecoder::Status::kMore;
  for (std::size_t i = 0; i < in.size() && s == http::ChunkedDecoder::Status::kMore; ++i) {
    std::size_t n = 0;
    s = bytewise.Feed(in.substr(i, 1), &n);
    total += n;
  }
  if (s != status || used > in.size()) __builtin_trap();
  if (status != http::ChunkedDecoder::Status::kMalformed && total != used) __builtin_trap();
  if (whole.announced() != bytewise.announced()) __builtin_trap();
  return 0;
}
