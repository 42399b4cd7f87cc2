#include "exporter/config/metric_families.h"

#include <algorithm>
#include <vector>

#include "exporter/config/config.h"

namespace podnet::config {

std::span<const MetricFamilyEntry> MetricFamilies() {
  static const std::vector<MetricFamilyEntry> kFamilies = [] {
    std::vector<MetricFamilyEntry> out;
    for (const auto& s : kProbeSections) {
      for (const auto& f : s.families) out.push_back({f.name, s.key, f.on_by_default});
    }
    std::sort(out.begin(), out.end(), [](const MetricFamilyEntry& a, const MetricFamilyEntry& b) {
      return a.name < b.name;
    });
    return out;
  }();
  return kFamilies;
}

std::set<std::string, std::less<>> DefaultFamiliesOff() {
  std::set<std::string, std::less<>> off;
  for (const auto& f : MetricFamilies()) {
    if (!f.on_by_default) off.emplace(f.name);
  }
  return off;
}

}  // namespace podnet::config
