#include "exporter/metrics/buckets.h"

#include <initializer_list>
#include <string>

namespace podnet::metrics {

namespace {

// `mantissas` (in hundredths) per decade from 10^first to 10^last seconds, then 10^last itself.
// Parsed from decimal text so each bound is the double nearest the decimal value (2.2e-05, not
// 2.2000000000000002e-05 from repeated multiplication).
std::vector<double> Decades(std::initializer_list<int> mantissas, int first, int last) {
  std::vector<double> b;
  for (int exp = first; exp <= last; ++exp) {
    for (int m : mantissas) {
      if (exp == last && m != 100) break;
      b.push_back(std::stod(std::to_string(m) + "e" + std::to_string(exp - 2)));
    }
  }
  return b;
}

}  // namespace

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> kBuckets = Decades({100, 150, 220, 330, 470, 680}, -5, 0);
  return kBuckets;
}

const std::vector<double>& DnsLatencyBuckets() {
  static const std::vector<double> kBuckets = [] {
    // 1-2.5-5 up to 1 s; then 5 s, 10 s and 30 s: what lies between a second and a timeout
    // needs no finer bound, and neither does more than one lost try.
    std::vector<double> b = Decades({100, 250, 500}, -4, 0);
    b.insert(b.end(), {5.0, 10.0, 30.0});
    return b;
  }();
  return kBuckets;
}

}  // namespace podnet::metrics
