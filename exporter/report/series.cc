#include "exporter/report/series.h"

#include <cmath>
#include <cstddef>
#include <limits>

namespace podnet::report {
namespace {

// What a quantile or bound of no observations is.
constexpr double kEmpty = std::numeric_limits<double>::quiet_NaN();

Labels LabelsOf(const prometheus::ClientMetric& m) {
  Labels l;
  for (const auto& p : m.label) l[p.name] = p.value;
  return l;
}

std::string Get(const Labels& l, const std::string& k) {
  auto it = l.find(k);
  return it == l.end() ? "" : it->second;
}

const prometheus::MetricFamily* Find(const std::vector<prometheus::MetricFamily>& fams,
                                     const std::string& name) {
  for (const auto& f : fams) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

double ValueOf(const prometheus::ClientMetric& m) {
  return m.counter.value + m.gauge.value + m.untyped.value;
}

// Calls fn(key, labels, series) for each series of family `name` whose labels include
// `match`; key: the values of the labels `by`, in that order ("" where absent). PromQL's
// `by (...)` grouping.
template <typename Fn>
void ForEachSeries(const std::vector<prometheus::MetricFamily>& fams, const std::string& name,
                   const std::vector<std::string>& by, const Labels& match, Fn fn) {
  const auto* f = Find(fams, name);
  if (!f) return;
  for (const auto& m : f->metric) {
    Labels l = LabelsOf(m);
    bool ok = true;
    for (const auto& [k, v] : match) ok = ok && Get(l, k) == v;
    if (!ok) continue;
    Key key;
    for (const auto& b : by) key.push_back(Get(l, b));
    fn(key, l, m);
  }
}

}  // namespace

std::map<Key, double> SumBy(const std::vector<prometheus::MetricFamily>& fams,
                            const std::string& name, const std::vector<std::string>& by,
                            const Labels& match) {
  std::map<Key, double> out;
  ForEachSeries(fams, name, by, match,
                [&](const Key& key, const Labels&, const auto& m) { out[key] += ValueOf(m); });
  return out;
}

std::map<Key, Buckets> HistBy(const std::vector<prometheus::MetricFamily>& fams,
                              const std::string& name, const std::vector<std::string>& by) {
  std::map<Key, Buckets> out;
  ForEachSeries(fams, name, by, {}, [&](const Key& key, const Labels&, const auto& m) {
    Buckets b;
    for (const auto& bucket : m.histogram.bucket) {
      b.cumulative.emplace_back(bucket.upper_bound, static_cast<double>(bucket.cumulative_count));
    }
    b.count = static_cast<double>(m.histogram.sample_count);
    b.sum = m.histogram.sample_sum;
    out[key].Add(b);
  });
  return out;
}

std::map<Key, std::set<std::string>> DistinctBy(const std::vector<prometheus::MetricFamily>& fams,
                                                const std::string& name,
                                                const std::vector<std::string>& by,
                                                const std::string& label) {
  std::map<Key, std::set<std::string>> out;
  ForEachSeries(fams, name, by, {}, [&](const Key& key, const Labels& l, const auto&) {
    out[key].insert(Get(l, label));
  });
  return out;
}

void Buckets::Add(const Buckets& other) {
  if (cumulative.empty()) {
    cumulative = other.cumulative;
  } else {
    for (std::size_t i = 0; i < cumulative.size() && i < other.cumulative.size(); ++i) {
      cumulative[i].second += other.cumulative[i].second;
    }
  }
  count += other.count;
  sum += other.sum;
}

double BucketQuantile(double q, const Buckets& b) {
  if (b.cumulative.size() < 2 || !std::isinf(b.cumulative.back().first)) return kEmpty;
  double total = b.cumulative.back().second;
  if (total <= 0) return kEmpty;
  double rank = q * total;
  std::size_t i = 0;
  while (i < b.cumulative.size() && b.cumulative[i].second < rank) ++i;
  if (i >= b.cumulative.size() - 1) return b.cumulative[b.cumulative.size() - 2].first;
  if (i == 0 && b.cumulative[0].first <= 0) return b.cumulative[0].first;
  double start = 0, end = b.cumulative[i].first, count = b.cumulative[i].second;
  if (i > 0) {
    start = b.cumulative[i - 1].first;
    count -= b.cumulative[i - 1].second;
    rank -= b.cumulative[i - 1].second;
  }
  return start + (end - start) * (rank / count);
}

double BucketMaxBound(const Buckets& b) {
  if (b.cumulative.empty() || b.cumulative.back().second <= 0) return kEmpty;
  for (const auto& [bound, n] : b.cumulative) {
    if (n >= b.cumulative.back().second) return bound;
  }
  return kEmpty;
}

}  // namespace podnet::report
