// The configuration file (YAML, ${VAR} expansion, the schema): any bytes give a result or
// errors, never a crash, a hang or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "exporter/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > podnet::config::kMaxFileBytes) return -1;  // LoadFile reads no more
  std::string text(reinterpret_cast<const char*>(data), size);
  auto env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "POD_NAME") return "pod-a";
    if (name == "BAD") return "peer-\xff";
    return std::nullopt;
  };
  auto r = podnet::config::Parse(text, "fuzz.yaml", env);
  for (const auto& e : r.errors) (void)e.ToString();
  return 0;
}
