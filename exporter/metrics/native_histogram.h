#pragma once

#include <prometheus/client_metric.h>
#include <prometheus/labels.h>
#include <prometheus/metric_family.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace podnet::metrics {

/// Native (sparse, exponential) histograms as Prometheus defines them (metrics.proto's
/// Histogram schema/zero/span/delta fields; prometheus/docs "Native Histograms"), which
/// prometheus-cpp 1.0.1 cannot produce. Bucket i of schema s holds (2^((i-1)/2^s), 2^(i/2^s)]:
/// 1 is a bound of every schema, and adjacent bounds are 2^(2^-s) apart.

/// The schema every series starts at: 3, adjacent bounds 2^(1/8) = 1.0905 apart (9.05 %), so a
/// median read from the buckets is within 9.05 % of the samples' over the whole range (a 20 µs
/// question and a 1 s timeout alike; the classic layout of buckets.h is 50 %).
inline constexpr int kNativeSchema = 3;
/// The zero bucket's half-width: |v| <= it counts as zero. client_golang's default
/// (DefNativeHistogramZeroThreshold, 2^-128): no latency is that small, so in practice only an
/// exact 0 lands there. Always > 0, which is how Prometheus 2.40-2.44 tell a native histogram
/// without samples from a classic one (model/textparse/protobufparse.go, isNativeHistogram).
inline constexpr double kNativeZeroThreshold = 2.938735877055719e-39;
/// Populated buckets (positive and negative) a series may hold. Past it, the schema goes down
/// by one (each pair of buckets merges; bounds 2^(2^-(s-1)) apart), as client_golang's
/// NativeHistogramMaxBucketNumber does, down to -4: memory stays bounded whatever a hostile path
/// does to the samples. 160 buckets at schema 3 span 20 doublings (1 µs to 1 s), so a latency
/// series never reaches it in practice.
inline constexpr std::size_t kNativeMaxBuckets = 160;

/// The index of the bucket that holds magnitude `v` (> 0, finite) under `schema` (-4..8):
/// the i with 2^((i-1)/2^s) < v <= 2^(i/2^s). Computed from frexp and a table of each schema's
/// bounds within one doubling, as client_golang does, so powers of two land exactly.
int NativeBucketIndex(double v, int schema);
/// The upper bound of bucket `index` under `schema`: 2^(index / 2^schema).
double NativeBucketUpperBound(int index, int schema);

/// What one series holds at one moment: populated buckets only, ascending by index.
struct NativeSnapshot {
  int schema = kNativeSchema;
  double zero_threshold = kNativeZeroThreshold;
  std::uint64_t zero_count = 0;
  std::vector<std::pair<int, std::uint64_t>> positive;  // (index, count), count > 0
  std::vector<std::pair<int, std::uint64_t>> negative;  // of |v|, for v < 0
  std::uint64_t count = 0;                              // samples observed (NaN left out)
  double sum = 0;
};

/// One native histogram series. Thread-safe (a mutex): probes observe on the probe loop while
/// /metrics snapshots on the control loop.
class NativeHistogram {
 public:
  /// Counts `v` (seconds, or the family's unit): |v| <= kNativeZeroThreshold in the zero bucket,
  /// v < 0 in the negative buckets of |v|, ±Inf in the bucket of the largest finite double.
  /// NaN is not counted (the classic histogram beside it still counts it in _count and _sum;
  /// the format allows a count above the buckets' sum).
  void Observe(double v);
  NativeSnapshot Snapshot() const;

 private:
  void Reduce();  // schema - 1, merging bucket pairs; mu_ held

  mutable std::mutex mu_;
  int schema_ = kNativeSchema;
  // Populated buckets, ascending by index: a sorted vector (16 bytes a bucket, where a map node
  // takes ~48), searched by binary search; a new bucket is rare after the first rounds.
  using Buckets = std::vector<std::pair<int, std::uint64_t>>;
  Buckets positive_;
  Buckets negative_;
  std::uint64_t zero_ = 0;
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

/// The native histograms of every family that has them, by family name and label set, so that
/// the protobuf exposition finds a collected classic series' native buckets
/// (prometheus::ClientMetric cannot carry them). Thread-safe.
class NativeHistograms {
 public:
  /// The series of `family` with `labels`: the existing one, or a new one.
  std::shared_ptr<NativeHistogram> Add(std::string_view family, const prometheus::Labels& labels);
  /// Removes that series (nothing when absent).
  void Remove(std::string_view family, const prometheus::Labels& labels);
  /// Removes every series of `family` (it was declared without native buckets).
  void RemoveFamily(std::string_view family);

  /// Every series' snapshot, keyed by Key(). Taken before the classic families are collected,
  /// so a collected classic series has counted at least what its native snapshot holds.
  using Snapshots = std::unordered_map<std::string, NativeSnapshot>;
  Snapshots SnapshotAll() const;
  /// The key of a series: the family name, then each label's name and value, each followed by
  /// a NUL, labels sorted by name.
  static std::string Key(std::string_view family, const prometheus::Labels& labels);
  static std::string Key(std::string_view family,
                         const std::vector<prometheus::ClientMetric::Label>& labels);

  std::size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<NativeHistogram>> series_;
};

}  // namespace podnet::metrics
