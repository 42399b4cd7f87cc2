// The iperf3 control connection's JSON documents (parameters from a client, results from a
// server), as the burst responder and the burst probe decode them.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "exporter/wire/iperf3.h"

namespace iperf3 = podnet::wire::iperf3;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > iperf3::kMaxJsonSize) return -1;  // the responder reads no larger document
  auto doc = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  std::string error;
  if (auto p = iperf3::DecodeParams(doc, &error)) {
    // What the responder does with accepted parameters must not overflow.
    std::int64_t seconds = std::int64_t{p->time} + p->omit;
    (void)seconds;
    (void)iperf3::FrameJson(iperf3::EncodeParams(*p));
  }
  if (auto r = iperf3::DecodeResults(doc, &error))
    (void)iperf3::FrameJson(iperf3::EncodeResults(*r));
  return 0;
}
