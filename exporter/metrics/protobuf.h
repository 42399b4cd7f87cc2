#pragma once

#include <prometheus/metric_family.h>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/metrics/native_histogram.h"

namespace podnet::metrics {

/// The Content-Type of the protobuf exposition format: a stream of io.prometheus.client
/// MetricFamily messages (Prometheus' metrics.proto), each preceded by its length as a varint.
inline constexpr std::string_view kProtobufContentType =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
    "encoding=delimited";

/// Writes collected prometheus-cpp families in the protobuf exposition format, encoded by
/// libprotobuf from metrics.proto (compiled at build time from Debian's
/// golang-github-prometheus-client-model-dev): one MetricFamily message per family, in the
/// families' order, as client_golang writes them — the family's name as registered (a counter
/// keeps its `_total`), help, type; per series its label pairs, the value (counter, gauge,
/// untyped), count, sum and quantiles (summary), or count, sum and the classic buckets
/// (cumulative count, upper bound) of a histogram, the +Inf bucket left out (the scraper derives
/// it from the count); a timestamp only when not 0. A histogram series with a native snapshot
/// (NativeHistograms::Key of its family and labels) also carries the native fields: schema,
/// zero threshold and count, and per sign the populated buckets as spans (offset: the first
/// index, then the gap after the previous span; gaps of 1 or 2 empty buckets are sent as zero
/// counts inside a span, as client_golang does, which is shorter than a new span) and deltas
/// (each count minus the previous one's), so Prometheus with native histograms on ingests one
/// native series and (2.40-2.44) ignores the classic buckets beside it.
/// The bytes go to `sink` in pieces of about `chunk` bytes, each ending with a whole message.
class ProtobufWriter {
 public:
  using Sink = std::function<void(std::string_view)>;
  explicit ProtobufWriter(Sink sink, std::size_t chunk = 64 * 1024);

  /// Writes every family, then hands what is left to the sink.
  void Write(const std::vector<prometheus::MetricFamily>& families,
             const NativeHistograms::Snapshots& native = {});

 private:
  Sink sink_;
  std::size_t chunk_;
  std::string buf_;
};

}  // namespace podnet::metrics
