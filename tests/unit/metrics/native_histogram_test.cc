#include "exporter/metrics/native_histogram.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "exporter/metrics/families.h"
#include "exporter/metrics/metrics.h"

namespace podnet::metrics {
namespace {

// The bucket bounds from their definition, in long double: bucket i of schema s ends at
// 2^(i / 2^s).
long double Bound(int index, int schema) {
  return std::pow(2.0L, static_cast<long double>(index) / std::pow(2.0L, schema));
}

TEST(NativeBucketIndexTest, EverySampleLiesInsideItsBucket) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> log2v(-30, 10);  // ~1 ns to 1,000 s
  for (int schema = -4; schema <= 8; ++schema) {
    for (int n = 0; n < 20000; ++n) {
      double v = std::exp2(log2v(rng));
      int i = NativeBucketIndex(v, schema);
      EXPECT_LT(Bound(i - 1, schema), v) << v << " schema " << schema;
      EXPECT_LE(v, Bound(i, schema)) << v << " schema " << schema;
    }
  }
}

TEST(NativeBucketIndexTest, PowersOfTwoAreUpperBoundsOfEverySchema) {
  for (int schema = -4; schema <= 8; ++schema) {
    for (int e = -40; e <= 40; ++e) {
      double v = std::ldexp(1.0, e);
      int i = NativeBucketIndex(v, schema);
      // v is the bound itself when 2^schema * e is a whole number (always for schema >= 0).
      if (schema >= 0 || e % (1 << -schema) == 0) {
        EXPECT_EQ(static_cast<long double>(v), Bound(i, schema)) << "2^" << e << " s" << schema;
      }
      // The next double up is in the next bucket exactly when v is a bound.
      int up = NativeBucketIndex(std::nextafter(v, 2 * v), schema);
      EXPECT_EQ(up, static_cast<long double>(v) == Bound(i, schema) ? i + 1 : i);
    }
  }
}

TEST(NativeBucketIndexTest, DefaultSchemaBoundsAreWithinTenPercentOverMicrosecondsToSeconds) {
  int first = NativeBucketIndex(1e-6, kNativeSchema);
  int last = NativeBucketIndex(30.0, kNativeSchema);
  for (int i = first; i < last; ++i) {
    double ratio =
        NativeBucketUpperBound(i + 1, kNativeSchema) / NativeBucketUpperBound(i, kNativeSchema);
    EXPECT_LE(ratio, 1.10) << "bucket " << i;
    EXPECT_GT(ratio, 1.0);
  }
  // The classic layout, for scale: 50 % (buckets.h).
  EXPECT_NEAR(NativeBucketUpperBound(1, kNativeSchema), std::pow(2.0, 1.0 / 8), 1e-15);
}

TEST(NativeHistogramTest, CountsZeroNegativeAndPositiveAsTheFormatDefines) {
  NativeHistogram h;
  h.Observe(0.0);
  h.Observe(-0.0);
  h.Observe(1e-45);   // below the zero threshold
  h.Observe(-2e-3);   // negative: the bucket of 2 ms among the negative ones
  h.Observe(500e-6);  // 500 µs
  h.Observe(500e-6);
  h.Observe(std::numeric_limits<double>::quiet_NaN());  // not counted
  h.Observe(std::numeric_limits<double>::infinity());   // the largest finite double's bucket
  NativeSnapshot s = h.Snapshot();
  EXPECT_EQ(s.schema, kNativeSchema);
  EXPECT_GT(s.zero_threshold, 0.0);
  EXPECT_EQ(s.zero_count, 3u);
  ASSERT_EQ(s.negative.size(), 1u);
  EXPECT_EQ(s.negative[0].first, NativeBucketIndex(2e-3, kNativeSchema));
  EXPECT_EQ(s.negative[0].second, 1u);
  ASSERT_EQ(s.positive.size(), 2u);
  EXPECT_EQ(s.positive[0].first, NativeBucketIndex(500e-6, kNativeSchema));
  EXPECT_EQ(s.positive[0].second, 2u);
  EXPECT_EQ(s.positive[1].first,
            NativeBucketIndex(std::numeric_limits<double>::max(), kNativeSchema));
  EXPECT_EQ(s.count, 7u);
  EXPECT_TRUE(std::isinf(s.sum));
}

TEST(NativeHistogramTest, TooManyBucketsLowerTheSchemaKeepingEverySampleInItsBucket) {
  NativeHistogram h;
  std::vector<double> samples;
  // 1 ns to ~17 min, every 2^(1/16): 640 distinct schema-3 buckets, far above the cap.
  for (int k = 0; k < 640; ++k) samples.push_back(1e-9 * std::exp2(k / 16.0));
  for (double v : samples) h.Observe(v);
  NativeSnapshot s = h.Snapshot();
  EXPECT_LT(s.schema, kNativeSchema);
  EXPECT_LE(s.positive.size(), kNativeMaxBuckets);
  // The merged counts equal the samples recounted at the final schema.
  std::map<int, std::uint64_t> want;
  for (double v : samples) ++want[NativeBucketIndex(v, s.schema)];
  std::map<int, std::uint64_t> got(s.positive.begin(), s.positive.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(s.count, samples.size());
}

TEST(NativeHistogramsTest, KeysAgreeBetweenLabelsAndCollectedLabelsInAnyOrder) {
  prometheus::Labels labels{{"peer", "a"}, {"path_class", "same_zone"}};
  std::vector<prometheus::ClientMetric::Label> collected{{"path_class", "same_zone"},
                                                         {"peer", "a"}};
  EXPECT_EQ(NativeHistograms::Key("f", labels), NativeHistograms::Key("f", collected));
  EXPECT_NE(NativeHistograms::Key("f", labels), NativeHistograms::Key("g", labels));
  // No concatenation collides: "ab"+"" vs "a"+"b".
  EXPECT_NE(NativeHistograms::Key("f", prometheus::Labels{{"ab", ""}}),
            NativeHistograms::Key("f", prometheus::Labels{{"a", "b"}}));
}

TEST(NativeHistogramsTest, SeriesSetAddsAndRemovesNativeWithClassic) {
  Metrics m;
  m.SetNativeHistograms(true);
  static const std::vector<double> kBuckets{0.001, 0.01};
  HistogramFamily f = DeclareHistogram(m, "podnet_test_seconds", "T.", kBuckets);
  ASSERT_TRUE(f.native);
  {
    SeriesSet a(m.series_refs());
    SeriesSet b(m.series_refs());
    HistogramSeries ha = a.Add(f, {{"peer_zone", "z"}});
    HistogramSeries hb = b.Add(f, {{"peer_zone", "z"}});  // shared, as aggregated peers are
    EXPECT_EQ(ha.native(), hb.native());
    ha.Observe(0.002);
    hb.Observe(0.002);
    EXPECT_EQ(ha.native()->Snapshot().count, 2u);
    EXPECT_EQ(m.native_histograms()->size(), 1u);
    a.RemoveAll();
    EXPECT_EQ(m.native_histograms()->size(), 1u);  // b still feeds it
    b.RemoveAll();
    EXPECT_EQ(m.native_histograms()->size(), 0u);
  }
  // Declared again with native histograms off: the family's native series go.
  SeriesSet c(m.series_refs());
  c.Add(f, {{"peer_zone", "y"}});
  EXPECT_EQ(m.native_histograms()->size(), 1u);
  m.SetNativeHistograms(false);
  HistogramFamily classic = DeclareHistogram(m, "podnet_test_seconds", "T.", kBuckets);
  EXPECT_FALSE(classic.native);
  EXPECT_EQ(m.native_histograms()->size(), 0u);
  EXPECT_FALSE(c.Add(classic, {{"peer_zone", "x"}}).native());
}

}  // namespace
}  // namespace podnet::metrics
