#include "exporter/scheduler/scheduler.h"

#include <chrono>

#include "exporter/scheduler/scheduler_impl.h"

namespace podnet::scheduler {

SchedulerMetrics::SchedulerMetrics(prometheus::Registry& registry)
    : skipped_(prometheus::BuildCounter()
                   .Name("podnet_probe_rounds_skipped_total")
                   .Help("Probe rounds not run because the previous round towards the same peer "
                         "was still running when they were due.")
                   .Register(registry)),
      start_delay_(prometheus::BuildHistogram()
                       .Name("podnet_probe_round_start_delay_seconds")
                       .Help("How late probe rounds started against their schedule.")
                       .Register(registry)) {}

prometheus::Counter& SchedulerMetrics::skipped(const std::string& kind) {
  return skipped_.Add({{"probe", kind}});
}

prometheus::Histogram& SchedulerMetrics::start_delay(const std::string& kind) {
  // 50 us to 5 s, about x2.5 apart: a loop that is merely busy shows in the low buckets, a
  // blocked one in the high ones.
  static const prometheus::Histogram::BucketBoundaries kBounds = {
      50e-6, 100e-6, 250e-6, 500e-6, 1e-3,   2.5e-3, 5e-3, 10e-3,
      25e-3, 50e-3,  100e-3, 250e-3, 500e-3, 1,      2.5,  5};
  return start_delay_.Add({{"probe", kind}}, kBounds);
}

template class BasicScheduler<std::chrono::steady_clock>;

}  // namespace podnet::scheduler
