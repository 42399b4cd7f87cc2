// The Accept-Encoding (RFC 9110 §12.5.3) and Accept (§12.5.1) field values of a /metrics
// request: the same bytes through both parsers.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "exporter/responders/http_server.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view value(reinterpret_cast<const char*>(data), size);
  (void)podnet::responders::AcceptsGzip(value);
  (void)podnet::responders::AcceptsProtobuf(value);
  return 0;
}
