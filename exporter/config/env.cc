#include "exporter/config/env.h"

#include <cstdlib>

namespace podnet::config {

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

namespace {
bool IsNameChar(char c, bool first) {
  return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (!first && c >= '0' && c <= '9');
}
}  // namespace

std::optional<std::string> ExpandEnv(std::string_view value, const EnvLookup& env,
                                     std::string* error, std::vector<std::string>* unset) {
  std::string out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    char c = value[i];
    if (c != '$') {
      out += c;
      continue;
    }
    if (i + 1 < value.size() && value[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    if (i + 1 >= value.size() || value[i + 1] != '{') {
      out += c;  // a lone '$' stays as written
      continue;
    }
    std::size_t close = value.find('}', i + 2);
    if (close == std::string_view::npos) {
      *error = "unterminated \"${\" in \"" + std::string(value) + "\"";
      return std::nullopt;
    }
    std::string_view inner = value.substr(i + 2, close - i - 2);
    std::string_view name = inner;
    std::optional<std::string_view> fallback;
    if (auto sep = inner.find(":-"); sep != std::string_view::npos) {
      name = inner.substr(0, sep);
      fallback = inner.substr(sep + 2);
    }
    bool valid = !name.empty();
    for (std::size_t k = 0; k < name.size(); ++k) valid = valid && IsNameChar(name[k], k == 0);
    if (!valid) {
      *error = "bad environment variable name \"" + std::string(name) + "\"";
      return std::nullopt;
    }
    std::optional<std::string> v = env(std::string(name));
    if ((!v || v->empty()) && fallback) {
      out += *fallback;
    } else if (v) {
      out += *v;
    } else if (unset != nullptr) {
      unset->emplace_back(name);
    }
    i = close;
  }
  return out;
}

}  // namespace podnet::config
