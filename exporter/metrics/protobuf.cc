#include "exporter/metrics/protobuf.h"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <io/prometheus/client/metrics.pb.h>

#include <cmath>
#include <stdexcept>

namespace podnet::metrics {
namespace {

namespace pb = io::prometheus::client;

pb::MetricType ProtobufType(prometheus::MetricType t) {
  switch (t) {
    case prometheus::MetricType::Counter:
      return pb::COUNTER;
    case prometheus::MetricType::Gauge:
      return pb::GAUGE;
    case prometheus::MetricType::Summary:
      return pb::SUMMARY;
    case prometheus::MetricType::Histogram:
      return pb::HISTOGRAM;
    case prometheus::MetricType::Untyped:
    default:
      return pb::UNTYPED;
  }
}

// One sign's buckets as spans and deltas (metrics.proto's BucketSpan: the first span's offset is
// its first index, a later one's the gap after the span before it).
template <typename AddSpan, typename AddDelta>
void AddBuckets(const std::vector<std::pair<int, std::uint64_t>>& buckets, AddSpan add_span,
                AddDelta add_delta) {
  constexpr int kMaxFilledGap = 2;
  pb::BucketSpan* span = nullptr;
  int next = 0;  // the index after the last bucket sent
  std::int64_t previous = 0;
  for (auto [index, count] : buckets) {
    if (!span) {
      span = add_span();
      span->set_offset(index);
    } else if (int gap = index - next; gap > kMaxFilledGap) {
      span = add_span();
      span->set_offset(gap);
    } else {
      for (int i = 0; i < gap; ++i) {  // empty buckets inside the span: count 0
        add_delta(-previous);
        previous = 0;
      }
      span->set_length(span->length() + static_cast<std::uint32_t>(gap));
    }
    auto c = static_cast<std::int64_t>(count);
    add_delta(c - previous);
    previous = c;
    span->set_length(span->length() + 1);
    next = index + 1;
  }
}

void AddNative(const NativeSnapshot& n, pb::Histogram* h) {
  h->set_schema(n.schema);
  h->set_zero_threshold(n.zero_threshold);
  h->set_zero_count(n.zero_count);
  AddBuckets(
      n.positive, [h] { return h->add_positive_span(); },
      [h](std::int64_t d) { h->add_positive_delta(d); });
  AddBuckets(
      n.negative, [h] { return h->add_negative_span(); },
      [h](std::int64_t d) { h->add_negative_delta(d); });
}

// One series; `native` its native buckets, if it has them.
void AddSeries(const prometheus::MetricFamily& f, const prometheus::ClientMetric& m,
               const NativeSnapshot* native, pb::Metric* out) {
  for (const auto& l : m.label) {
    auto* p = out->add_label();
    p->set_name(l.name);
    p->set_value(l.value);
  }
  switch (f.type) {
    case prometheus::MetricType::Counter:
      out->mutable_counter()->set_value(m.counter.value);
      break;
    case prometheus::MetricType::Gauge:
      out->mutable_gauge()->set_value(m.gauge.value);
      break;
    case prometheus::MetricType::Summary: {
      auto* s = out->mutable_summary();
      s->set_sample_count(m.summary.sample_count);
      s->set_sample_sum(m.summary.sample_sum);
      for (const auto& q : m.summary.quantile) {
        auto* pq = s->add_quantile();
        pq->set_quantile(q.quantile);
        pq->set_value(q.value);
      }
      break;
    }
    case prometheus::MetricType::Histogram: {
      auto* h = out->mutable_histogram();
      h->set_sample_count(m.histogram.sample_count);
      h->set_sample_sum(m.histogram.sample_sum);
      for (const auto& b : m.histogram.bucket) {
        if (std::isinf(b.upper_bound) && b.upper_bound > 0) continue;  // +Inf: from the count
        auto* pb_bucket = h->add_bucket();
        pb_bucket->set_cumulative_count(b.cumulative_count);
        pb_bucket->set_upper_bound(b.upper_bound);
      }
      if (native) AddNative(*native, h);
      break;
    }
    case prometheus::MetricType::Untyped:
    default:
      out->mutable_untyped()->set_value(m.untyped.value);
      break;
  }
  if (m.timestamp_ms != 0) out->set_timestamp_ms(m.timestamp_ms);
}

}  // namespace

ProtobufWriter::ProtobufWriter(Sink sink, std::size_t chunk)
    : sink_(std::move(sink)), chunk_(chunk) {
  buf_.reserve(chunk_ + chunk_ / 4);
}

void ProtobufWriter::Write(const std::vector<prometheus::MetricFamily>& families,
                           const NativeHistograms::Snapshots& native) {
  pb::MetricFamily msg;  // reused: its fields keep their allocations from family to family
  for (const auto& f : families) {
    msg.Clear();
    msg.set_name(f.name);
    if (!f.help.empty()) msg.set_help(f.help);
    msg.set_type(ProtobufType(f.type));
    for (const auto& m : f.metric) {
      const NativeSnapshot* n = nullptr;
      if (f.type == prometheus::MetricType::Histogram && !native.empty()) {
        auto it = native.find(NativeHistograms::Key(f.name, m.label));
        if (it != native.end()) n = &it->second;
      }
      AddSeries(f, m, n, msg.add_metric());
    }
    // Appends to buf_; the coded stream inside trims buf_ to what it wrote when it ends.
    google::protobuf::io::StringOutputStream out(&buf_);
    if (!google::protobuf::util::SerializeDelimitedToZeroCopyStream(msg, &out)) {
      throw std::runtime_error("protobuf exposition: cannot encode family " + f.name);
    }
    if (buf_.size() >= chunk_) {
      sink_(buf_);
      buf_.clear();
    }
  }
  if (!buf_.empty()) sink_(buf_);
  buf_.clear();
}

}  // namespace podnet::metrics
