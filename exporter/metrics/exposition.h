#pragma once

#include <prometheus/metric_family.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace podnet::metrics {

/// Writes collected prometheus-cpp families in the text exposition format, version 0.0.4
/// (https://prometheus.io/docs/instrumenting/exposition_formats/), byte for byte as
/// prometheus-cpp 1.0.1's TextSerializer (core/src/text_serializer.cc) writes them — `# HELP`
/// (when not empty) and `# TYPE` lines, samples in the families' order, values as printf
/// "%.16g" ("Nan", "+Inf", "-Inf"), counts as integers, label values with `\`, `"` and newline
/// escaped, `_count`, `_sum`, then `_bucket` lines of a histogram, a timestamp when not 0 —
/// with one stated difference: each `le` bound is its shortest text that reads back to the same
/// double (AppendLe), as client_golang writes it. tests/unit/metrics/exposition_test.cc holds it
/// to TextSerializer + RewriteLe on a fixture of every metric type and edge value.
///
/// Why not TextSerializer: it writes through std::ostream one character of a label value at a
/// time (85-145 ms for 1,000 peers here); this writer appends to one reused buffer and formats
/// numbers with std::to_chars. Text goes to `sink` in pieces of about `chunk` bytes, each
/// ending with a complete line, so no full copy of the text need exist.
class TextWriter {
 public:
  using Sink = std::function<void(std::string_view)>;
  explicit TextWriter(Sink sink, std::size_t chunk = 64 * 1024);

  /// Writes every family, then hands what is left to the sink.
  void Write(const std::vector<prometheus::MetricFamily>& families);

 private:
  void Family(const prometheus::MetricFamily& f);
  // One histogram's _count, _sum and _bucket lines (+Inf added when the buckets lack it);
  // `extra`: scratch for the le value.
  void Histogram(const prometheus::MetricFamily& f, const prometheus::ClientMetric& m,
                 std::string& extra);
  void Head(const prometheus::MetricFamily& f, const prometheus::ClientMetric& m,
            std::string_view suffix, std::string_view extra_name = {},
            std::string_view extra_value = {});
  void Tail(const prometheus::ClientMetric& m);
  void CountAndSum(const prometheus::MetricFamily& f, const prometheus::ClientMetric& m,
                   std::uint64_t count, double sum);
  void Value(double v);
  void Count(std::uint64_t v);
  void Escaped(std::string_view s);
  void MaybeFlush();
  void Flush();

  Sink sink_;
  std::size_t chunk_;
  std::string buf_;
};

/// Appends `v` as an `le` value: "+Inf"/"-Inf"/"Nan" as TextSerializer, otherwise the shortest
/// digits that read back to `v`, fixed for exponents -4..15 and scientific outside (the style of
/// %g), so 8e-05 is "8e-05" and 0.0006 is "0.0006" where %.16g gives "8.000000000000001e-05"
/// and "0.0005999999999999999".
void AppendLe(double v, std::string& out);

/// Copies text exposition `text` to `out`, rewriting each finite `le="..."` value as AppendLe
/// would write it. The reference the writer is tested against (TextSerializer + RewriteLe).
void RewriteLe(std::string_view text, std::string& out);

}  // namespace podnet::metrics
