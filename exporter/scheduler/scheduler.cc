#include "exporter/scheduler/scheduler.h"

#include <chrono>

#include "exporter/scheduler/scheduler_impl.h"

namespace podnet::scheduler {

SchedulerMetrics::SchedulerMetrics(prometheus::Registry& registry, const metrics::Metrics* native)
    : skipped_(prometheus::BuildCounter()
                   .Name("podnet_probe_rounds_skipped_total")
                   .Help("Probe rounds not run because the previous round towards the same peer "
                         "was still running when they were due.")
                   .Register(registry)),
      start_delay_(prometheus::BuildHistogram()
                       .Name("podnet_probe_round_start_delay_seconds")
                       .Help("How late probe rounds started against their schedule.")
                       .Register(registry)),
      native_(native) {}

prometheus::Counter& SchedulerMetrics::skipped(const std::string& kind) {
  return skipped_.Add({{"probe", kind}});
}

metrics::HistogramSeries SchedulerMetrics::start_delay(const std::string& kind) {
  // 100 us to 2.5 s, x4 to x10 apart (7 bounds, 10 series a probe kind): a loop that is on
  // time is below 1 ms, a busy one in the low milliseconds, one that something blocked above
  // 25 ms. This is the loop's health, not a measurement: a finer layout would cost series on
  // every Pod for nothing a reader acts on.
  static const prometheus::Histogram::BucketBoundaries kBounds = {100e-6, 1e-3,   5e-3, 25e-3,
                                                                  100e-3, 500e-3, 2.5};
  static constexpr std::string_view kName = "podnet_probe_round_start_delay_seconds";
  prometheus::Labels labels{{"probe", kind}};
  auto store = native_ ? native_->NativeStoreFor(kName) : nullptr;
  return {&start_delay_.Add(labels, kBounds), store ? store->Add(kName, labels) : nullptr};
}

template class BasicScheduler<std::chrono::steady_clock>;

}  // namespace podnet::scheduler
