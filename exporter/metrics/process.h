#pragma once

#include <prometheus/metric_family.h>

#include <optional>
#include <string>
#include <vector>

namespace podnet::metrics {

/// The standard process metrics every Prometheus client library exports (client_golang's
/// process collector, the names and meanings of its procfs reader), for this process, read at
/// each scrape from Linux's procfs (proc(5)):
///   process_cpu_seconds_total        counter  (utime + stime) / CLK_TCK of /proc/self/stat
///   process_resident_memory_bytes    gauge    rss pages (/proc/self/stat) x page size
///   process_virtual_memory_bytes     gauge    vsize of /proc/self/stat
///   process_open_fds                 gauge    entries of /proc/self/fd
///   process_max_fds                  gauge    RLIMIT_NOFILE soft limit (getrlimit(2))
///   process_start_time_seconds       gauge    Unix time: btime of /proc/stat + starttime /
///                                             CLK_TCK of /proc/self/stat
/// And one of our own, where a leak shows first (RSS hides it among the allocator's free pages):
///   podnet_heap_allocated_bytes      gauge    bytes malloc has handed out and not had back:
///                                             glibc mallinfo2(3) uordblks + hblkhd, summed
///                                             over every arena (absent without glibc)
/// A figure that cannot be read is left out (its family is absent), never exported as 0.
std::vector<prometheus::MetricFamily> CollectProcessMetrics();

/// The fields CollectProcessMetrics reads from the text of /proc/PID/stat, parsed after the
/// last ')' (the command name may hold spaces and parentheses); nullopt when malformed.
struct ProcStat {
  double utime_ticks = 0, stime_ticks = 0, starttime_ticks = 0;
  double vsize_bytes = 0, rss_pages = 0;
};
std::optional<ProcStat> ParseProcStat(const std::string& text);

}  // namespace podnet::metrics
