// resolv.conf(5) as glibc and as musl read it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "exporter/probes/dns/resolv_conf.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "RES_OPTIONS") return "ndots:15 attempts:9 timeout:99";
    return std::nullopt;
  };
  for (auto libc : {podnet::probes::dns::Libc::kGlibc, podnet::probes::dns::Libc::kMusl}) {
    (void)podnet::probes::dns::ParseResolvConf(text, libc, env);
  }
  return 0;
}
