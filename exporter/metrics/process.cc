#include "exporter/metrics/process.h"

#include <dirent.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace podnet::metrics {
namespace {

std::string ReadFile(const char* path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

prometheus::MetricFamily Family(const char* name, const char* help, prometheus::MetricType type,
                                double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
  return f;
}

std::optional<double> BootTimeSeconds() {
  std::istringstream in(ReadFile("/proc/stat"));
  std::string key;
  double value;
  while (in >> key) {
    if (key == "btime" && in >> value) return value;
    in.ignore(1 << 20, '\n');
  }
  return std::nullopt;
}

std::optional<double> OpenFds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return std::nullopt;
  double n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1;  // the descriptor opendir itself holds
}

}  // namespace

std::optional<ProcStat> ParseProcStat(const std::string& text) {
  // proc(5): "pid (comm) state ppid ..."; after comm, fields 3.. are space separated.
  std::size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(text.substr(close + 1));
  std::vector<std::string> f;  // f[0] is field 3 (state)
  std::string word;
  while (in >> word && f.size() < 22) f.push_back(word);
  if (f.size() < 22) return std::nullopt;
  try {
    ProcStat s;
    s.utime_ticks = std::stod(f[14 - 3]);
    s.stime_ticks = std::stod(f[15 - 3]);
    s.starttime_ticks = std::stod(f[22 - 3]);
    s.vsize_bytes = std::stod(f[23 - 3]);
    s.rss_pages = std::stod(f[24 - 3]);
    return s;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::vector<prometheus::MetricFamily> CollectProcessMetrics() {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  if (auto st = ParseProcStat(ReadFile("/proc/self/stat")); st && ticks > 0) {
    out.push_back(Family("process_cpu_seconds_total",
                         "Total user and system CPU time spent in seconds.", MetricType::Counter,
                         (st->utime_ticks + st->stime_ticks) / ticks));
    if (auto fds = OpenFds()) {
      out.push_back(
          Family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, *fds));
    }
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
      out.push_back(Family("process_max_fds", "Maximum number of open file descriptors.",
                           MetricType::Gauge,
                           lim.rlim_cur == RLIM_INFINITY ? -1 : static_cast<double>(lim.rlim_cur)));
    }
    out.push_back(Family("process_resident_memory_bytes", "Resident memory size in bytes.",
                         MetricType::Gauge, st->rss_pages * page));
    if (auto boot = BootTimeSeconds()) {
      out.push_back(Family("process_start_time_seconds",
                           "Start time of the process since unix epoch in seconds.",
                           MetricType::Gauge, *boot + st->starttime_ticks / ticks));
    }
    out.push_back(Family("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                         MetricType::Gauge, st->vsize_bytes));
  }
#ifdef __GLIBC__
  // mallinfo2 (glibc >= 2.33) walks every arena under its lock: microseconds, once a scrape.
  struct mallinfo2 heap = mallinfo2();
  out.push_back(Family("podnet_heap_allocated_bytes",
                       "Bytes of heap that malloc has handed out and not had back (glibc "
                       "mallinfo2: uordblks + hblkhd, every arena).",
                       MetricType::Gauge, static_cast<double>(heap.uordblks + heap.hblkhd)));
#endif
  return out;
}

}  // namespace podnet::metrics
