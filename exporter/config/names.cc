#include "exporter/config/names.h"

namespace podnet::config {

bool ValidDnsName(const std::string& name) {
  std::string n = name;
  if (!n.empty() && n.back() == '.') n.pop_back();
  if (n.empty() || n.size() > 253) return false;
  std::size_t label = 0;
  for (char ch : n) {
    if (ch == '.') {
      if (label == 0) return false;
      label = 0;
    } else if (ch <= ' ' || ch == 0x7f || ch == '|') {
      return false;
    } else if (++label > 63) {
      return false;
    }
  }
  return label > 0;
}

bool ValidKubernetesName(std::string_view s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char ch : s) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-')) return false;
  }
  return true;
}

}  // namespace podnet::config
