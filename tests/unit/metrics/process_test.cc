#include "exporter/metrics/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <vector>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PODNET_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PODNET_SANITIZED 1
#endif
#endif

namespace podnet::metrics {
namespace {

// A real line of /proc/PID/stat (proc(5)) whose command name holds a space and parentheses.
TEST(ProcessMetricsTest, ParseProcStatReadsTheFieldsAfterTheCommandName) {
  std::string line =
      "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 5 0 123456 "
      "987654321 2048 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";
  auto s = ParseProcStat(line);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->utime_ticks, 250);
  EXPECT_EQ(s->stime_ticks, 75);
  EXPECT_EQ(s->starttime_ticks, 123456);
  EXPECT_EQ(s->vsize_bytes, 987654321);
  EXPECT_EQ(s->rss_pages, 2048);
  EXPECT_FALSE(ParseProcStat("4242 (x) S 1 2 3").has_value());
  EXPECT_FALSE(ParseProcStat("no parenthesis").has_value());
}

TEST(ProcessMetricsTest, TheStandardSixAndTheHeapOfThisProcess) {
  std::map<std::string, double> got;
  for (const auto& f : CollectProcessMetrics()) {
    ASSERT_EQ(f.metric.size(), 1u) << f.name;
    got[f.name] = f.type == prometheus::MetricType::Counter ? f.metric[0].counter.value
                                                            : f.metric[0].gauge.value;
  }
  // The standard six, and with glibc our heap figure.
#ifdef __GLIBC__
  ASSERT_EQ(got.size(), 7u);
#ifndef PODNET_SANITIZED  // the sanitizer's malloc, not glibc's: glibc's arenas stay empty
  EXPECT_GT(got["podnet_heap_allocated_bytes"], 0);
#endif
#else
  ASSERT_EQ(got.size(), 6u);
#endif
  // Open one more descriptor: the count follows.
  int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  double open_after = 0;
  for (const auto& f : CollectProcessMetrics()) {
    if (f.name == "process_open_fds") open_after = f.metric[0].gauge.value;
  }
  close(fd);
  EXPECT_EQ(open_after, got["process_open_fds"] + 1);
  EXPECT_GT(got["process_max_fds"], got["process_open_fds"]);
  EXPECT_GT(got["process_resident_memory_bytes"], 0);
  EXPECT_GE(got["process_virtual_memory_bytes"], got["process_resident_memory_bytes"]);
  EXPECT_GE(got["process_cpu_seconds_total"], 0);
  double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // Started before now, and this test binary has not run for a day.
  EXPECT_LE(got["process_start_time_seconds"], now + 1);
  EXPECT_GT(got["process_start_time_seconds"], now - 86400);
}

#if defined(__GLIBC__) && !defined(PODNET_SANITIZED)
// The heap figure follows what malloc hands out and gets back (under a sanitizer, malloc is the
// sanitizer's and glibc's figures stay still: not checked there).
TEST(ProcessMetricsTest, HeapFollowsAnAllocationAndItsFree) {
  auto heap = [] {
    for (const auto& f : CollectProcessMetrics()) {
      if (f.name == "podnet_heap_allocated_bytes") return f.metric[0].gauge.value;
    }
    return -1.0;
  };
  // The figure is the whole process's: a thread left by an earlier test of the suite may free
  // or take memory between two reads (once in a full run: 4 MiB less 4 bytes). A few tries;
  // one where nothing else moved is enough.
  double before = 0, during = 0, after = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    before = heap();
    auto* block = new std::vector<char>(4 << 20, 'x');  // 4 MiB, touched
    during = heap();
    delete block;
    after = heap();
    if (during - before >= (4 << 20) && after - before < (1 << 20)) break;
  }
  EXPECT_GE(during - before, 4 << 20);
  EXPECT_LT(after - before, 1 << 20);
}
#endif

}  // namespace
}  // namespace podnet::metrics
