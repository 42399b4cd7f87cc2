// A nameserver's replies, as each model reads the answers the walk ended on (answer.h): the
// first byte picks where the two messages split and glibc's buffer (1,024 << 0..3 bytes); any
// bytes give a verdict and a count, never more.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "exporter/probes/dns/answer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::size_t split = rest.size() * (data[0] >> 2) / 63;
  std::string_view first = rest.substr(0, split), second = rest.substr(split);
  (void)podnet::probes::dns::GlibcReadAnswers(
      first, second, podnet::probes::dns::kGlibcFirstBuffer << (data[0] & 3));
  (void)podnet::probes::dns::MuslAddresses(first, second);
  return 0;
}
