// A kubeconfig (YAML). Relative file references resolve under a directory that does not exist,
// so the target reads no files of this machine.
#include <cstddef>
#include <cstdint>
#include <string>

#include "exporter/discovery/kubernetes/api_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 256 * 1024) return -1;
  std::string text(reinterpret_cast<const char*>(data), size);
  std::string error;
  (void)podnet::discovery::kubernetes::ParseKubeconfig(text, "/nonexistent-podnet-fuzz", "",
                                                       &error);
  return 0;
}
