#include "exporter/metrics/native_histogram.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace podnet::metrics {
namespace {

constexpr int kMinSchema = -4;
constexpr int kMaxSchema = 8;

// For schema s > 0: the 2^s bounds within one doubling, as frexp fractions in [0.5, 1):
// bounds[k] = 2^(k/2^s - 1). Bucket k of the doubling [2^(e-1), 2^e) ends at bounds[k] * 2^e.
const std::vector<double>& FractionBounds(int schema) {
  static const std::array<std::vector<double>, kMaxSchema + 1> kBounds = [] {
    std::array<std::vector<double>, kMaxSchema + 1> b;
    for (int s = 1; s <= kMaxSchema; ++s) {
      int n = 1 << s;
      for (int k = 0; k < n; ++k) b[s].push_back(std::exp2(static_cast<double>(k) / n - 1));
    }
    return b;
  }();
  return kBounds[schema];
}

void AppendPart(std::string& key, std::string_view part) {
  key += part;
  key.push_back('\0');
}

using Buckets = std::vector<std::pair<int, std::uint64_t>>;

void Count(Buckets& buckets, int index) {
  auto it = std::lower_bound(buckets.begin(), buckets.end(), index,
                             [](const auto& b, int i) { return b.first < i; });
  if (it != buckets.end() && it->first == index) {
    ++it->second;
  } else {
    buckets.insert(it, {index, 1});
  }
}

// Bucket i of schema s lies in bucket ceil(i/2) of schema s-1: its upper bound 2^(i/2^s) is at
// most 2^(ceil(i/2)/2^(s-1)) and above 2^((ceil(i/2)-1)/2^(s-1)). Ascending in, ascending out.
void Halve(Buckets& buckets) {
  Buckets out;
  for (auto [i, n] : buckets) {
    int j = (i + 1) >> 1;  // >> of a negative: floor (C++20)
    if (!out.empty() && out.back().first == j) {
      out.back().second += n;
    } else {
      out.emplace_back(j, n);
    }
  }
  buckets = std::move(out);
}

}  // namespace

int NativeBucketIndex(double v, int schema) {
  int exp = 0;
  double frac = std::frexp(v, &exp);  // v = frac * 2^exp, frac in [0.5, 1)
  if (schema > 0) {
    const auto& bounds = FractionBounds(schema);
    auto k = std::lower_bound(bounds.begin(), bounds.end(), frac) - bounds.begin();
    return static_cast<int>(k) + (exp - 1) * (1 << schema);
  }
  // Schema <= 0: bucket i ends at 2^(i * 2^-schema); a power of two is its bucket's bound.
  int key = frac == 0.5 ? exp - 1 : exp;
  int offset = (1 << -schema) - 1;
  return (key + offset) >> -schema;
}

double NativeBucketUpperBound(int index, int schema) {
  return std::exp2(std::ldexp(static_cast<double>(index), -schema));
}

void NativeHistogram::Observe(double v) {
  if (std::isnan(v)) return;
  double magnitude = std::min(std::fabs(v), std::numeric_limits<double>::max());
  std::lock_guard lock(mu_);
  ++count_;
  sum_ += v;
  if (magnitude <= kNativeZeroThreshold) {
    ++zero_;
    return;
  }
  Count(v > 0 ? positive_ : negative_, NativeBucketIndex(magnitude, schema_));
  while (positive_.size() + negative_.size() > kNativeMaxBuckets && schema_ > kMinSchema) {
    Reduce();
  }
}

void NativeHistogram::Reduce() {
  Halve(positive_);
  Halve(negative_);
  --schema_;
}

NativeSnapshot NativeHistogram::Snapshot() const {
  NativeSnapshot s;
  std::lock_guard lock(mu_);
  s.schema = schema_;
  s.zero_count = zero_;
  s.positive = positive_;
  s.negative = negative_;
  s.count = count_;
  s.sum = sum_;
  return s;
}

std::shared_ptr<NativeHistogram> NativeHistograms::Add(std::string_view family,
                                                       const prometheus::Labels& labels) {
  std::lock_guard lock(mu_);
  auto& h = series_[Key(family, labels)];
  if (!h) h = std::make_shared<NativeHistogram>();
  return h;
}

void NativeHistograms::Remove(std::string_view family, const prometheus::Labels& labels) {
  std::lock_guard lock(mu_);
  series_.erase(Key(family, labels));
}

void NativeHistograms::RemoveFamily(std::string_view family) {
  std::string prefix;
  AppendPart(prefix, family);
  std::lock_guard lock(mu_);
  std::erase_if(series_, [&](const auto& e) { return e.first.starts_with(prefix); });
}

NativeHistograms::Snapshots NativeHistograms::SnapshotAll() const {
  std::vector<std::pair<std::string, std::shared_ptr<NativeHistogram>>> all;
  {
    std::lock_guard lock(mu_);
    all.assign(series_.begin(), series_.end());
  }
  Snapshots out;
  out.reserve(all.size());
  for (auto& [key, h] : all) out.emplace(std::move(key), h->Snapshot());
  return out;
}

std::size_t NativeHistograms::size() const {
  std::lock_guard lock(mu_);
  return series_.size();
}

std::string NativeHistograms::Key(std::string_view family, const prometheus::Labels& labels) {
  std::string key;
  AppendPart(key, family);
  for (const auto& [name, value] : labels) {  // std::map: sorted by name
    AppendPart(key, name);
    AppendPart(key, value);
  }
  return key;
}

std::string NativeHistograms::Key(std::string_view family,
                                  const std::vector<prometheus::ClientMetric::Label>& labels) {
  std::vector<const prometheus::ClientMetric::Label*> sorted;
  sorted.reserve(labels.size());
  for (const auto& l : labels) sorted.push_back(&l);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  std::string key;
  AppendPart(key, family);
  for (const auto* l : sorted) {
    AppendPart(key, l->name);
    AppendPart(key, l->value);
  }
  return key;
}

}  // namespace podnet::metrics
