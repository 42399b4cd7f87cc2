#pragma once

#include <prometheus/metric_family.h>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

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
/// it from the count); a timestamp only when not 0. Native-histogram fields are not set yet.
/// The bytes go to `sink` in pieces of about `chunk` bytes, each ending with a whole message.
class ProtobufWriter {
 public:
  using Sink = std::function<void(std::string_view)>;
  explicit ProtobufWriter(Sink sink, std::size_t chunk = 64 * 1024);

  /// Writes every family, then hands what is left to the sink.
  void Write(const std::vector<prometheus::MetricFamily>& families);

 private:
  Sink sink_;
  std::size_t chunk_;
  std::string buf_;
};

}  // namespace podnet::metrics
