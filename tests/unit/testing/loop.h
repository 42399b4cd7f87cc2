#pragma once

// Helpers shared by the loopback tests: an io_context on its own thread, reading series back
// from a prometheus-cpp registry, and whether IPv6 loopback works here.

#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace podnet::testing {

/// An io_context running on a thread of its own, as each of the exporter's loops does. Objects
/// that live on the loop are made and destroyed through Run, never from the test thread.
class LoopThread {
 public:
  LoopThread() : work_(boost::asio::make_work_guard(io_)), thread_([this] { io_.run(); }) {}
  ~LoopThread() { Stop(); }
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;

  boost::asio::io_context& io() { return io_; }

  /// Runs `f` on the loop and waits for its result (exceptions are rethrown here).
  template <typename F>
  std::invoke_result_t<F> Run(F&& f) {
    std::packaged_task<std::invoke_result_t<F>()> task(std::forward<F>(f));
    auto result = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    return result.get();
  }

  void Stop() {
    if (!thread_.joinable()) return;
    work_.reset();
    io_.stop();
    thread_.join();
  }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
};

/// Whether `have` carries every label of `want` (and maybe more).
inline bool HasLabels(const prometheus::ClientMetric& m, const prometheus::Labels& want) {
  for (const auto& [name, value] : want) {
    bool found = false;
    for (const auto& l : m.label) found = found || (l.name == name && l.value == value);
    if (!found) return false;
  }
  return true;
}

/// Renders a label set as `{a="1", b="2"}`, for failure messages.
inline std::string LabelsText(const std::vector<prometheus::ClientMetric::Label>& labels) {
  std::string out = "{";
  for (const auto& l : labels) {
    if (out.size() > 1) out += ", ";
    out += l.name + "=\"" + l.value + "\"";
  }
  return out + "}";
}

/// The one series of family `name` that has `labels`; std::nullopt when there is none.
/// Several matches are a test failure naming every matching label set (and std::nullopt):
/// `labels` must pick out one series, so that "gone" and "there" mean that series.
inline std::optional<prometheus::ClientMetric> FindSeries(prometheus::Registry& registry,
                                                          const std::string& name,
                                                          const prometheus::Labels& labels) {
  std::vector<prometheus::ClientMetric> found;
  for (const auto& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const auto& m : family.metric) {
      if (HasLabels(m, labels)) found.push_back(m);
    }
  }
  if (found.size() > 1) {
    std::string sets;
    for (const auto& m : found) sets += "\n  " + LabelsText(m.label);
    ADD_FAILURE() << name << ": " << found.size()
                  << " series match the labels given, want one:" << sets;
    return std::nullopt;
  }
  if (found.empty()) return std::nullopt;
  return found.front();
}

/// A counter's value, or -1 when the series does not exist.
inline double CounterValue(prometheus::Registry& registry, const std::string& name,
                           const prometheus::Labels& labels) {
  auto m = FindSeries(registry, name, labels);
  return m ? m->counter.value : -1;
}

/// How much longer a wait may take than on a plain build: $PODNET_TEST_TIME_SCALE (a whole
/// number ≥ 1; scripts/sanitize.sh sets it, as sanitized code runs several times slower). It only
/// stretches how long a test waits for something to happen, never what it asserts.
inline int TimeScale() {
  static const int scale = [] {
    const char* v = std::getenv("PODNET_TEST_TIME_SCALE");
    int n = v ? std::atoi(v) : 1;
    return n >= 1 ? n : 1;
  }();
  return scale;
}

/// Polls `done` until it is true or `timeout` (× TimeScale()) passes; returns its last value.
inline bool Eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
  auto deadline = std::chrono::steady_clock::now() + timeout * TimeScale();
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

/// The number of entries in /proc/self/fd (open descriptors, plus the one reading it and
/// the "." and ".." entries): compare two readings, never an absolute value.
inline int OpenFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

/// Whether a UDP socket can bind ::1 here (a container may have IPv6 off): tests over IPv6
/// loopback skip when it cannot.
inline bool Ipv6LoopbackWorks() {
  int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

}  // namespace podnet::testing
