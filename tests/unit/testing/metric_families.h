#pragma once

// Collected families of every metric type with edge values, for the exposition tests (text
// and protobuf).

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>

#include <limits>
#include <vector>

namespace podnet::testing {

// Every metric type, through a real registry, with edge values: NaN, infinities, negative,
// huge and tiny numbers, integers past 2^53, label values needing escapes, an empty help,
// the exporter's latency buckets (whose %.16g text is long), explicit timestamps.
inline std::vector<prometheus::MetricFamily> EveryMetricType() {
  prometheus::Registry registry;
  auto& c = prometheus::BuildCounter().Name("fx_total").Help("A counter.").Register(registry);
  c.Add({{"peer", "a\"b\\c\nd"}, {"path_class", "same_node"}}).Increment(3);
  c.Add({}).Increment(1e20);
  c.Add({{"x", ""}}).Increment(0.1 + 0.2);
  auto& g = prometheus::BuildGauge().Name("fx_gauge").Register(registry);  // no help
  g.Add({{"k", "nan"}}).Set(std::numeric_limits<double>::quiet_NaN());
  g.Add({{"k", "+inf"}}).Set(std::numeric_limits<double>::infinity());
  g.Add({{"k", "-inf"}}).Set(-std::numeric_limits<double>::infinity());
  g.Add({{"k", "neg"}}).Set(-1.5e-7);
  g.Add({{"k", "big"}}).Set(9007199254740993.0);
  g.Add({{"k", "unicode"}}).Set(1234567.891);
  auto& h = prometheus::BuildHistogram().Name("fx_seconds").Help("Latency.").Register(registry);
  // Bounds whose shortest text is shorter than the library's 17-digit one (RewriteLe).
  const prometheus::Histogram::BucketBoundaries bounds = {
      5e-06, 6e-06,  8e-06,  1e-05,  1.25e-05, 1.5e-05, 2e-05, 3e-05, 6e-05,
      8e-05, 0.0001, 0.0003, 0.0006, 0.0125,   0.3,     0.6,   1};
  auto& lat = h.Add({{"path_class", "cross_zone"}}, bounds);
  for (double v : {5e-6, 8e-5, 3.3e-4, 0.0006, 0.0125, 0.2, 7.0}) lat.Observe(v);
  h.Add({{"path_class", "empty"}}, prometheus::Histogram::BucketBoundaries{0.1, 1, 10});
  auto& s = prometheus::BuildSummary().Name("fx_summary").Help("S.").Register(registry);
  auto& sm = s.Add({}, prometheus::Summary::Quantiles{{0.5, 0.05}, {0.99, 0.001}});
  for (int i = 1; i <= 100; ++i) sm.Observe(i * 0.01);
  auto families = registry.Collect();
  // Timestamps and an untyped family exist only in hand-made families.
  prometheus::MetricFamily u;
  u.name = "fx_untyped";
  u.help = "Untyped, with a timestamp.";
  u.type = prometheus::MetricType::Untyped;
  prometheus::ClientMetric m;
  m.untyped.value = 42;
  m.timestamp_ms = 1700000000123;
  m.label.push_back({"a", "1"});
  u.metric.push_back(m);
  families.push_back(u);
  return families;
}

}  // namespace podnet::testing
