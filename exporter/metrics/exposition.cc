#include "exporter/metrics/exposition.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace podnet::metrics {
namespace {

constexpr const char* TypeName(prometheus::MetricType t) {
  switch (t) {
    case prometheus::MetricType::Counter:
      return "counter";
    case prometheus::MetricType::Gauge:
      return "gauge";
    case prometheus::MetricType::Summary:
      return "summary";
    case prometheus::MetricType::Untyped:
      return "untyped";
    case prometheus::MetricType::Histogram:
      return "histogram";
    default:
      return "untyped";
  }
}

// TextSerializer's doubles: "Nan", "+Inf"/"-Inf", else std::ostream with precision 16 in the
// classic locale, i.e. printf "%.16g" — which std::to_chars(general, 16) is defined to equal.
void AppendValue(double v, std::string& out) {
  if (std::isnan(v)) {
    out += "Nan";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-Inf" : "+Inf";
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general,
                         std::numeric_limits<double>::max_digits10 - 1);
  out.append(buf, r.ptr);
}

}  // namespace

void AppendLe(double v, std::string& out) {
  if (!std::isfinite(v)) {
    AppendValue(v, out);
    return;
  }
  char buf[64];
  auto sci = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const char* e = std::find(buf, sci.ptr, 'e');
  int exponent = 0;
  if (e != sci.ptr) std::from_chars(e + (e[1] == '+' ? 2 : 1), sci.ptr, exponent);
  if (exponent >= -4 && exponent < 16) {
    auto fixed = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
    out.append(buf, fixed.ptr);
    return;
  }
  out.append(buf, sci.ptr);
}

void RewriteLe(std::string_view text, std::string& out) {
  static constexpr std::string_view kLe = "le=\"";
  std::size_t pos = 0;
  for (std::size_t at = text.find(kLe); at != std::string_view::npos; at = text.find(kLe, at + 1)) {
    if (at == 0 || (text[at - 1] != '{' && text[at - 1] != ',')) continue;  // e.g. scale="
    std::size_t begin = at + kLe.size();
    std::size_t end = text.find('"', begin);
    if (end == std::string_view::npos) break;
    double v = 0;
    auto [ptr, ec] = std::from_chars(text.data() + begin, text.data() + end, v);
    if (ec != std::errc{} || ptr != text.data() + end || !std::isfinite(v)) continue;  // +Inf
    out.append(text.substr(pos, begin - pos));
    AppendLe(v, out);
    pos = end;
  }
  out.append(text.substr(pos));
}

TextWriter::TextWriter(Sink sink, std::size_t chunk) : sink_(std::move(sink)), chunk_(chunk) {
  buf_.reserve(chunk_ + chunk_ / 4);
}

void TextWriter::Write(const std::vector<prometheus::MetricFamily>& families) {
  for (const auto& f : families) Family(f);
  Flush();
}

void TextWriter::Flush() {
  if (!buf_.empty()) sink_(buf_);
  buf_.clear();
}

// Called after each complete line: a piece handed on always ends with one.
void TextWriter::MaybeFlush() {
  if (buf_.size() >= chunk_) Flush();
}

void TextWriter::Escaped(std::string_view s) {
  // Most label values need no escape: copy them whole.
  std::size_t from = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c != '\n' && c != '\\' && c != '"') continue;
    buf_.append(s.substr(from, i - from));
    buf_ += '\\';
    buf_ += c == '\n' ? 'n' : c;
    from = i + 1;
  }
  buf_.append(s.substr(from));
}

void TextWriter::Value(double v) { AppendValue(v, buf_); }

void TextWriter::Count(std::uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  buf_.append(buf, r.ptr);
}

void TextWriter::Head(const prometheus::MetricFamily& f, const prometheus::ClientMetric& m,
                      std::string_view suffix, std::string_view extra_name,
                      std::string_view extra_value) {
  buf_ += f.name;
  buf_ += suffix;
  if (!m.label.empty() || !extra_name.empty()) {
    buf_ += '{';
    bool first = true;
    for (const auto& l : m.label) {
      if (!first) buf_ += ',';
      first = false;
      buf_ += l.name;
      buf_ += "=\"";
      Escaped(l.value);
      buf_ += '"';
    }
    if (!extra_name.empty()) {
      if (!first) buf_ += ',';
      buf_ += extra_name;
      buf_ += "=\"";
      buf_ += extra_value;  // numbers and "+Inf": nothing to escape
      buf_ += '"';
    }
    buf_ += '}';
  }
  buf_ += ' ';
}

void TextWriter::Tail(const prometheus::ClientMetric& m) {
  if (m.timestamp_ms != 0) {
    buf_ += ' ';
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, m.timestamp_ms);
    buf_.append(buf, r.ptr);
  }
  buf_ += '\n';
  MaybeFlush();
}

void TextWriter::CountAndSum(const prometheus::MetricFamily& f, const prometheus::ClientMetric& m,
                             std::uint64_t count, double sum) {
  Head(f, m, "_count");
  Count(count);
  Tail(m);
  Head(f, m, "_sum");
  Value(sum);
  Tail(m);
}

void TextWriter::Histogram(const prometheus::MetricFamily& f, const prometheus::ClientMetric& m,
                           std::string& extra) {
  CountAndSum(f, m, m.histogram.sample_count, m.histogram.sample_sum);
  double last = -std::numeric_limits<double>::infinity();
  for (const auto& b : m.histogram.bucket) {
    extra.clear();
    AppendLe(b.upper_bound, extra);
    Head(f, m, "_bucket", "le", extra);
    last = b.upper_bound;
    Count(b.cumulative_count);
    Tail(m);
  }
  if (last != std::numeric_limits<double>::infinity()) {
    Head(f, m, "_bucket", "le", "+Inf");
    Count(m.histogram.sample_count);
    Tail(m);
  }
}

void TextWriter::Family(const prometheus::MetricFamily& f) {
  if (!f.help.empty()) {
    buf_ += "# HELP ";
    buf_ += f.name;
    buf_ += ' ';
    buf_ += f.help;  // TextSerializer 1.0.1 does not escape help text; neither do we
    buf_ += '\n';
  }
  buf_ += "# TYPE ";
  buf_ += f.name;
  buf_ += ' ';
  buf_ += TypeName(f.type);
  buf_ += '\n';
  std::string extra;  // an le or quantile value, reused
  for (const auto& m : f.metric) {
    switch (f.type) {
      case prometheus::MetricType::Counter:
        Head(f, m, {});
        Value(m.counter.value);
        Tail(m);
        break;
      case prometheus::MetricType::Gauge:
        Head(f, m, {});
        Value(m.gauge.value);
        Tail(m);
        break;
      case prometheus::MetricType::Untyped:
        Head(f, m, {});
        Value(m.untyped.value);
        Tail(m);
        break;
      case prometheus::MetricType::Summary:
        CountAndSum(f, m, m.summary.sample_count, m.summary.sample_sum);
        for (const auto& q : m.summary.quantile) {
          extra.clear();
          AppendValue(q.quantile, extra);
          Head(f, m, {}, "quantile", extra);
          Value(q.value);
          Tail(m);
        }
        break;
      case prometheus::MetricType::Histogram:
        Histogram(f, m, extra);
        break;
      default:
        break;
    }
  }
}

}  // namespace podnet::metrics
