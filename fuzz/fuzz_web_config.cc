// The web configuration (--web.config.file: exporter-toolkit's YAML) and the Authorization
// header basic auth decodes: any bytes give a result or errors, never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "exporter/web/basic_auth.h"
#include "exporter/web/web_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 64 * 1024) return -1;  // LoadWebConfig reads no more
  std::string text(reinterpret_cast<const char*>(data), size);
  auto r = podnet::web::ParseWebConfig(text, "/etc/podnet/web/web.yml");
  for (const auto& e : r.errors) (void)e.ToString();
  (void)podnet::web::BasicAuth::User(text);
  return 0;
}
