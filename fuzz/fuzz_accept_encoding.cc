// The Accept-Encoding field value of a /metrics request (RFC 9110 §12.5.3).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "exporter/responders/http_server.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)podnet::responders::AcceptsGzip(
      std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
