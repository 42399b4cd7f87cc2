#include "exporter/metrics/protobuf.h"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <gtest/gtest.h>
#include <io/prometheus/client/metrics.pb.h>

#include <cctype>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "exporter/metrics/buckets.h"
#include "exporter/metrics/exposition.h"
#include "exporter/metrics/families.h"
#include "exporter/metrics/metrics.h"
#include "tests/unit/testing/gzip.h"
#include "tests/unit/testing/metric_families.h"
#include "tests/unit/testing/text_exposition.h"

namespace podnet::metrics {
namespace {

namespace pb = io::prometheus::client;

// Reads a delimited stream back with libprotobuf; fails the test on a broken stream.
std::vector<pb::MetricFamily> ParseDelimited(const std::string& bytes) {
  std::vector<pb::MetricFamily> out;
  google::protobuf::io::ArrayInputStream in(bytes.data(), static_cast<int>(bytes.size()));
  for (std::size_t i = 0; i <= bytes.size(); ++i) {  // bounded: a message takes >= 1 byte
    pb::MetricFamily f;
    bool clean_eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&f, &in, &clean_eof)) {
      EXPECT_TRUE(clean_eof) << "broken stream after " << out.size() << " families";
      break;
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::string WrittenProtobuf(const std::vector<prometheus::MetricFamily>& families,
                            std::size_t chunk, int* pieces = nullptr) {
  std::string out;
  int n = 0;
  ProtobufWriter w(
      [&](std::string_view piece) {
        EXPECT_FALSE(piece.empty());
        // Each piece holds whole messages: it parses alone.
        std::string alone(piece);
        EXPECT_FALSE(ParseDelimited(alone).empty());
        out.append(piece);
        ++n;
      },
      chunk);
  w.Write(families);
  if (pieces) *pieces = n;
  return out;
}

// NaN equals NaN here: the value must come through bit for bit as a double.
void ExpectSameDouble(double want, double got, const std::string& where) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << where;
  } else {
    EXPECT_EQ(want, got) << where;
  }
}

// The type each family has in the text exposition of the same families ("# TYPE name type").
std::map<std::string, std::string> TextTypesOf(const std::vector<prometheus::MetricFamily>& fs) {
  std::string text;
  TextWriter([&](std::string_view piece) { text.append(piece); }).Write(fs);
  return testing::TypeLines(text);
}

std::string LowerCase(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Every family, series, label and value of `got` against the prometheus-cpp input.
void ExpectEqualFamilies(const std::vector<prometheus::MetricFamily>& want,
                         const std::vector<pb::MetricFamily>& got) {
  ASSERT_EQ(got.size(), want.size());
  auto text_types = TextTypesOf(want);
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto& w = want[i];
    const auto& g = got[i];
    EXPECT_EQ(g.name(), w.name);
    EXPECT_EQ(g.help(), w.help);
    EXPECT_EQ(g.has_help(), !w.help.empty()) << w.name;
    EXPECT_EQ(LowerCase(pb::MetricType_Name(g.type())), text_types[w.name]) << w.name;
    ASSERT_EQ(static_cast<std::size_t>(g.metric_size()), w.metric.size()) << w.name;
    for (std::size_t j = 0; j < w.metric.size(); ++j) {
      const auto& wm = w.metric[j];
      const auto& gm = g.metric(static_cast<int>(j));
      std::string where = w.name + " series " + std::to_string(j);
      ASSERT_EQ(static_cast<std::size_t>(gm.label_size()), wm.label.size()) << where;
      for (std::size_t k = 0; k < wm.label.size(); ++k) {
        EXPECT_EQ(gm.label(static_cast<int>(k)).name(), wm.label[k].name) << where;
        EXPECT_EQ(gm.label(static_cast<int>(k)).value(), wm.label[k].value) << where;
      }
      EXPECT_EQ(gm.timestamp_ms(), wm.timestamp_ms) << where;
      EXPECT_EQ(gm.has_timestamp_ms(), wm.timestamp_ms != 0) << where;
      switch (w.type) {
        case prometheus::MetricType::Counter:
          ASSERT_TRUE(gm.has_counter()) << where;
          ExpectSameDouble(wm.counter.value, gm.counter().value(), where);
          break;
        case prometheus::MetricType::Gauge:
          ASSERT_TRUE(gm.has_gauge()) << where;
          ExpectSameDouble(wm.gauge.value, gm.gauge().value(), where);
          break;
        case prometheus::MetricType::Summary: {
          ASSERT_TRUE(gm.has_summary()) << where;
          const auto& s = gm.summary();
          EXPECT_EQ(s.sample_count(), wm.summary.sample_count) << where;
          ExpectSameDouble(wm.summary.sample_sum, s.sample_sum(), where);
          ASSERT_EQ(static_cast<std::size_t>(s.quantile_size()), wm.summary.quantile.size());
          for (std::size_t k = 0; k < wm.summary.quantile.size(); ++k) {
            EXPECT_EQ(s.quantile(static_cast<int>(k)).quantile(), wm.summary.quantile[k].quantile);
            ExpectSameDouble(wm.summary.quantile[k].value, s.quantile(static_cast<int>(k)).value(),
                             where);
          }
          break;
        }
        case prometheus::MetricType::Histogram: {
          ASSERT_TRUE(gm.has_histogram()) << where;
          const auto& h = gm.histogram();
          EXPECT_EQ(h.sample_count(), wm.histogram.sample_count) << where;
          ExpectSameDouble(wm.histogram.sample_sum, h.sample_sum(), where);
          // The finite buckets, in order; +Inf left out (its count is sample_count).
          std::vector<prometheus::ClientMetric::Bucket> finite;
          for (const auto& b : wm.histogram.bucket) {
            if (b.upper_bound != std::numeric_limits<double>::infinity()) {
              finite.push_back(b);
            } else {
              EXPECT_EQ(b.cumulative_count, h.sample_count()) << where;
            }
          }
          ASSERT_EQ(static_cast<std::size_t>(h.bucket_size()), finite.size()) << where;
          for (std::size_t k = 0; k < finite.size(); ++k) {
            EXPECT_EQ(h.bucket(static_cast<int>(k)).upper_bound(), finite[k].upper_bound);
            EXPECT_EQ(h.bucket(static_cast<int>(k)).cumulative_count(), finite[k].cumulative_count)
                << where;
          }
          // No native-histogram field yet: the scraper takes it for a classic histogram.
          EXPECT_FALSE(h.has_schema()) << where;
          EXPECT_EQ(h.positive_span_size() + h.negative_span_size(), 0) << where;
          EXPECT_FALSE(h.has_zero_threshold()) << where;
          break;
        }
        default:
          ASSERT_TRUE(gm.has_untyped()) << where;
          ExpectSameDouble(wm.untyped.value, gm.untyped().value(), where);
          break;
      }
    }
  }
}

TEST(ProtobufTest, EveryFamilyReadsBackAsCollected) {
  auto families = testing::EveryMetricType();
  ASSERT_EQ(families.size(), 5u) << "the fixture holds every metric type";
  std::string bytes = WrittenProtobuf(families, 64 * 1024);
  ExpectEqualFamilies(families, ParseDelimited(bytes));
  // A 1-byte chunk: one piece per family, and the same bytes.
  int pieces = 0;
  EXPECT_EQ(WrittenProtobuf(families, 1, &pieces), bytes);
  EXPECT_EQ(pieces, static_cast<int>(families.size()));
}

TEST(ProtobufTest, CounterKeepsItsRegisteredName) {
  // client_golang and Prometheus' protobuf parser: a counter family is named as registered,
  // `_total` included; the series' name is the family's.
  auto got = ParseDelimited(WrittenProtobuf(testing::EveryMetricType(), 64 * 1024));
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].name(), "fx_total");
  EXPECT_EQ(got[0].type(), pb::COUNTER);
}

TEST(ProtobufTest, EmptyInputIsEmptyBody) { EXPECT_TRUE(WrittenProtobuf({}, 64 * 1024).empty()); }

// The sample lines of a text exposition, by family: what a text scrape gives the scraper.
std::size_t TextSampleCount(const std::string& text) {
  std::istringstream in(text);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty() && line[0] != '#';
  return n;
}

// The samples a scraper makes of the protobuf families (a histogram: count, sum, each finite
// bucket and +Inf; a summary: count, sum, each quantile).
std::size_t ProtobufSampleCount(const std::vector<pb::MetricFamily>& families) {
  std::size_t n = 0;
  for (const auto& f : families) {
    for (const auto& m : f.metric()) {
      if (f.type() == pb::HISTOGRAM) {
        n += 3 + static_cast<std::size_t>(m.histogram().bucket_size());
      } else if (f.type() == pb::SUMMARY) {
        n += 2 + static_cast<std::size_t>(m.summary().quantile_size());
      } else {
        n += 1;
      }
    }
  }
  return n;
}

TEST(ProtobufTest, MetricsServesTheSameSeriesAsText) {
  Metrics m;
  auto& h =
      prometheus::BuildHistogram().Name("podnet_test_seconds").Help("T.").Register(m.registry());
  for (int i = 0; i < 50; ++i) {
    h.Add({{"peer", "p" + std::to_string(i)}}, prometheus::Histogram::BucketBoundaries{0.001, 0.1})
        .Observe(i * 0.01);
  }
  std::string text = m.Serialize();
  std::string proto = m.Serialize(Metrics::Encoding::kIdentity, Metrics::Format::kProtobuf);
  auto families = ParseDelimited(proto);
  ASSERT_FALSE(families.empty());
  EXPECT_EQ(ProtobufSampleCount(families), TextSampleCount(text));
  // Each family of the text is in the protobuf, with its type.
  for (const auto& f : families) {
    EXPECT_NE(text.find("# TYPE " + f.name() + " "), std::string::npos) << f.name();
  }
  // gzip: the same messages compressed (process_* values may move between two collects).
  std::string gz = m.Serialize(Metrics::Encoding::kGzip, Metrics::Format::kProtobuf);
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  auto unzipped = ParseDelimited(testing::Gunzip(gz));
  ASSERT_EQ(unzipped.size(), families.size());
  for (std::size_t i = 0; i < families.size(); ++i) {
    EXPECT_EQ(unzipped[i].name(), families[i].name());
    EXPECT_EQ(unzipped[i].metric_size(), families[i].metric_size());
  }
}

// The (index, count) pairs a span/delta list stands for (metrics.proto's BucketSpan rules).
std::vector<std::pair<int, std::uint64_t>> Expand(
    const google::protobuf::RepeatedPtrField<pb::BucketSpan>& spans,
    const google::protobuf::RepeatedField<std::int64_t>& deltas) {
  std::vector<std::pair<int, std::uint64_t>> out;
  int index = 0;
  int d = 0;
  std::int64_t count = 0;
  for (int s = 0; s < spans.size(); ++s) {
    index += spans[s].offset();  // the first: where it starts; later: the gap after the last
    for (std::uint32_t k = 0; k < spans[s].length(); ++k, ++index) {
      EXPECT_LT(d, deltas.size());
      if (d >= deltas.size()) return out;
      count += deltas[d++];
      EXPECT_GE(count, 0);
      if (count > 0) out.emplace_back(index, static_cast<std::uint64_t>(count));
    }
  }
  EXPECT_EQ(d, deltas.size()) << "deltas left over";
  return out;
}

TEST(ProtobufTest, NativeBucketsReadBackAsObserved) {
  Metrics m;
  m.SetNativeHistograms(true);
  HistogramFamily f = DeclareHistogram(m, "podnet_test_seconds", "T.", LatencyBuckets());
  SeriesSet set(m.series_refs());
  HistogramSeries h = set.Add(f, {{"peer", "a"}});
  HistogramSeries empty = set.Add(f, {{"peer", "b"}});
  // Gaps of 1, 2 and 3 empty buckets between populated ones, samples on both sides of 1 s, a
  // zero and negatives.
  std::vector<double> samples{0.0, -0.004, -0.004, -0.5};
  for (int i : {-80, -79, -77, -74, -70, -3, 0, 1, 9}) {
    for (int k = 0; k <= (i & 3); ++k) samples.push_back(NativeBucketUpperBound(i, 3) * 0.99);
  }
  for (double v : samples) h.Observe(v);
  NativeSnapshot want = h.native()->Snapshot();
  auto families =
      ParseDelimited(m.Serialize(Metrics::Encoding::kIdentity, Metrics::Format::kProtobuf));
  const pb::MetricFamily* family = nullptr;
  for (const auto& fam : families) {
    if (fam.name() == "podnet_test_seconds") family = &fam;
  }
  ASSERT_NE(family, nullptr);
  ASSERT_EQ(family->metric_size(), 2);
  for (const auto& metric : family->metric()) {
    const pb::Histogram& got = metric.histogram();
    // Both kinds of bucket in one message: the classic ones too.
    EXPECT_EQ(got.bucket_size(), static_cast<int>(LatencyBuckets().size()));
    EXPECT_EQ(got.schema(), kNativeSchema);
    EXPECT_EQ(got.zero_threshold(), kNativeZeroThreshold);
    if (metric.label(0).value() == "b") {  // no samples: still native (zero_threshold > 0)
      EXPECT_EQ(got.positive_span_size(), 0);
      EXPECT_EQ(got.sample_count(), 0u);
      continue;
    }
    EXPECT_EQ(got.zero_count(), want.zero_count);
    EXPECT_EQ(got.sample_count(), samples.size());
    EXPECT_EQ(Expand(got.positive_span(), got.positive_delta()), want.positive);
    EXPECT_EQ(Expand(got.negative_span(), got.negative_delta()), want.negative);
    // Gaps of <= 2 ride inside a span; gaps of 3, 66 and 7 open new ones: [-80, -74], [-70],
    // [-3, 1], [9].
    EXPECT_EQ(got.positive_span_size(), 4);
  }
  (void)empty;
  // Text carries the classic buckets only, and the same count.
  EXPECT_NE(
      m.Serialize().find("podnet_test_seconds_count{peer=\"a\"} " + std::to_string(samples.size())),
      std::string::npos);
}

TEST(ProtobufTest, WithoutNativeHistogramsNoNativeField) {
  Metrics m;
  HistogramFamily f = DeclareHistogram(m, "podnet_test_seconds", "T.", LatencyBuckets());
  SeriesSet set(m.series_refs());
  set.Add(f, {{"peer", "a"}}).Observe(0.001);
  for (const auto& fam :
       ParseDelimited(m.Serialize(Metrics::Encoding::kIdentity, Metrics::Format::kProtobuf))) {
    if (fam.name() != "podnet_test_seconds") continue;
    EXPECT_FALSE(fam.metric(0).histogram().has_schema());
    EXPECT_EQ(fam.metric(0).histogram().zero_threshold(), 0.0);
    EXPECT_EQ(fam.metric(0).histogram().positive_span_size(), 0);
  }
}

}  // namespace
}  // namespace podnet::metrics
