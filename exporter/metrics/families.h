#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exporter/metrics/native_histogram.h"

namespace podnet::metrics {

class Metrics;

using CounterFamily = prometheus::Family<prometheus::Counter>;
using GaugeFamily = prometheus::Family<prometheus::Gauge>;

/// A histogram family and the bucket layout every series added to it gets (SeriesSet::Add,
/// probes' AddSeries): upper bounds, ascending, in the family's base unit (buckets.h). The
/// layout is declared once, with the name, not at each place that adds a series.
/// With metrics.native_histograms, every series also gets native buckets (native_histogram.h),
/// kept in `native` under the family's `name`; null without.
struct HistogramFamily {
  prometheus::Family<prometheus::Histogram>& family;
  const std::vector<double>& buckets;
  std::string name;
  std::shared_ptr<NativeHistograms> native;
};

/// One histogram series as a probe holds it: the classic buckets (prometheus-cpp), and the
/// native ones when its family has them. Valid until its SeriesSet removes it.
class HistogramSeries {
 public:
  HistogramSeries() = default;
  HistogramSeries(prometheus::Histogram* classic, std::shared_ptr<NativeHistogram> native)
      : classic_(classic), native_(std::move(native)) {}

  /// Counts one sample (the family's unit: seconds) in both. Must hold a series.
  void Observe(double v) const {
    classic_->Observe(v);
    if (native_) native_->Observe(v);
  }
  /// Whether it holds a series (default-constructed: none).
  explicit operator bool() const { return classic_ != nullptr; }
  prometheus::Histogram& classic() const { return *classic_; }
  const NativeHistogram* native() const { return native_.get(); }

 private:
  prometheus::Histogram* classic_ = nullptr;
  std::shared_ptr<NativeHistogram> native_;
};

/// Declares the family `name` with `help` in `metrics` and returns it: the one place a metric's
/// name, help text and (for a histogram) bucket layout are written. A family the configuration
/// turns off (metrics.families; Metrics::SetFamiliesOff) is declared in a registry /metrics
/// never serves: its series are written as usual and cost their memory, but no scrape sees or
/// serializes them. A second declaration of the same name and type returns the family already
/// there (prometheus-cpp's InsertBehavior::Merge: each probe kind declares its families again
/// when a reload rebuilds it). Throws std::invalid_argument (prometheus-cpp) for an invalid name
/// or one declared with another type: a programmer error, seen at start-up. Probe loop only.
CounterFamily& DeclareCounter(Metrics& metrics, const std::string& name, const std::string& help);
GaugeFamily& DeclareGauge(Metrics& metrics, const std::string& name, const std::string& help);
/// `buckets` must outlive the family (the layouts of buckets.h are static). With
/// Metrics::native_histograms() on, the family's series get native buckets too; off, any native
/// series of this name left from before are dropped.
HistogramFamily DeclareHistogram(Metrics& metrics, const std::string& name, const std::string& help,
                                 const std::vector<double>& buckets);

}  // namespace podnet::metrics
