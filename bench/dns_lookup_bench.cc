// podnet-bench-dns: N lookups of NAME through a resolver model, one after another on one
// io_context, as the DNS probe performs them (channels kept between lookups). Prints the mean
// wall time per lookup, the questions per lookup and the process CPU (user + system) per 1,000
// lookups, in the format bench/dns_vs_getaddrinfo.sh reads:
//   ours <resolver> lookups=N questions=Q wall_us=W cpu_ms_per_1000=C failures=F
#include <sys/resource.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "exporter/probes/dns/lookup.h"

using namespace podnet::probes::dns;

namespace {
double CpuMs() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s glibc|musl RESOLV_CONF COUNT NAME\n", argv[0]);
    return 2;
  }
  auto libc = ParseLibc(argv[1]);
  long n = std::strtol(argv[3], nullptr, 10);
  if (!libc || n < 1 || n > 1000000) {
    std::fprintf(stderr, "bad resolver or count\n");
    return 2;
  }
  ResolvConf conf = LoadResolvConf(argv[2], *libc, podnet::config::ProcessEnv());
  std::string name = argv[4];
  boost::asio::io_context io;
  auto pool = std::make_shared<ChannelPool>(io);
  long done = 0, failures = 0, questions = 0;
  std::shared_ptr<Lookup> current;
  std::function<void()> next = [&] {
    current = Lookup::Start(io, pool, conf, *libc, name, [&](LookupOutcome o) {
      questions += static_cast<long>(o.queries.size());
      if (o.result != Result::kSuccess) ++failures;
      if (++done < n) next();
    });
  };
  double cpu0 = CpuMs();
  auto t0 = std::chrono::steady_clock::now();
  next();
  io.run();
  double wall_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  double cpu = CpuMs() - cpu0;
  std::printf("ours %s lookups=%ld questions=%.1f wall_us=%.1f cpu_ms_per_1000=%.1f failures=%ld\n",
              argv[1], done, static_cast<double>(questions) / done, wall_us / done,
              cpu * 1000.0 / done, failures);
  return failures == 0 ? 0 : 1;
}
