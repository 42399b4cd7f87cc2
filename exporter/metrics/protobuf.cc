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

// One series. The native-histogram fields (schema, spans, deltas) are for a later step; a
// histogram without them is a classic one to the scraper.
void AddSeries(const prometheus::MetricFamily& f, const prometheus::ClientMetric& m,
               pb::Metric* out) {
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

void ProtobufWriter::Write(const std::vector<prometheus::MetricFamily>& families) {
  pb::MetricFamily msg;  // reused: its fields keep their allocations from family to family
  for (const auto& f : families) {
    msg.Clear();
    msg.set_name(f.name);
    if (!f.help.empty()) msg.set_help(f.help);
    msg.set_type(ProtobufType(f.type));
    for (const auto& m : f.metric) AddSeries(f, m, msg.add_metric());
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
