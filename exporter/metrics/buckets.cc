#include "exporter/metrics/buckets.h"

#include <string>

namespace podnet::metrics {

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> kBuckets = [] {
    // Mantissas in hundredths, parsed from decimal text so each bound is the double nearest the
    // decimal value (1.25e-05, not 1.2500000000000002e-05 from repeated multiplication).
    constexpr int kMantissas[] = {100, 125, 150, 200, 250, 300, 400, 500, 600, 800};
    std::vector<double> b;
    for (int exp = -6; exp <= 0; ++exp) {
      for (int m : kMantissas) {
        double v = std::stod(std::to_string(m) + "e" + std::to_string(exp - 2));
        if (v >= 5e-6 && v <= 1.0) b.push_back(v);
      }
    }
    return b;
  }();
  return kBuckets;
}

}  // namespace podnet::metrics
