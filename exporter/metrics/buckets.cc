#include "exporter/metrics/buckets.h"

#include <string>

namespace podnet::metrics {

namespace {

// The 1-1.25-1.5-2-2.5-3-4-5-6-8 series per decade from 5 µs up to `max` seconds. Mantissas in
// hundredths, parsed from decimal text so each bound is the double nearest the decimal value
// (1.25e-05, not 1.2500000000000002e-05 from repeated multiplication).
std::vector<double> Series(double max) {
  constexpr int kMantissas[] = {100, 125, 150, 200, 250, 300, 400, 500, 600, 800};
  std::vector<double> b;
  for (int exp = -6; exp <= 1; ++exp) {
    for (int m : kMantissas) {
      double v = std::stod(std::to_string(m) + "e" + std::to_string(exp - 2));
      if (v >= 5e-6 && v <= max) b.push_back(v);
    }
  }
  return b;
}

}  // namespace

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> kBuckets = Series(1.0);
  return kBuckets;
}

const std::vector<double>& DnsLatencyBuckets() {
  static const std::vector<double> kBuckets = [] {
    std::vector<double> b = Series(10.0);
    b.insert(b.end(), {15.0, 20.0, 30.0});
    return b;
  }();
  return kBuckets;
}

}  // namespace podnet::metrics
