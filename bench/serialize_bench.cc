// podnet-bench-serialize: where a /metrics scrape's time goes at N peers (bench/README.md).
//
// Builds the series the RTT probe makes per peer (podnet_rtt_seconds with the latency buckets,
// 5 podnet_rtt_* counters, podnet_probe_{sent,received}_bytes_total: 64 sample lines per peer)
// with metrics::PeerLabels, then times, as the median of R rounds, side by side:
//   collect        prometheus-cpp Registry::Collect alone
//   library floor  Collect + prometheus-cpp's TextSerializer into a streambuf that drops the
//                  text: what any use of the library's serializer costs, whatever the buffer
//   ostringstream  Collect + TextSerializer into an ostringstream + .str() (the buffer handling
//                  /metrics had before; its le pass, one more full copy, not included)
//   writer         Collect + our TextWriter (exposition.h) into a sink that drops the text: the
//                  same text as the library floor (le shortest), side by side with it
//   identity       metrics::Metrics::Serialize() (/metrics without gzip)
//   gzip           metrics::Metrics::Serialize(kGzip) (/metrics as Prometheus asks for it)
// Each row: median wall ms and median CPU ms (this process's CPU clock; single-threaded), and
// CPU as a fraction of the library floor's. Targets (issue 11): identity median <= 50 ms;
// writer CPU <= 1/4 of the library floor's.
// Usage: podnet-bench-serialize [PEERS=1000] [ROUNDS=10] [--aggregate]
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "exporter/metrics/buckets.h"
#include "exporter/metrics/exposition.h"
#include "exporter/metrics/metrics.h"

namespace {

using podnet::metrics::Metrics;

class NullBuf : public std::streambuf {
 protected:
  int_type overflow(int_type c) override { return traits_type::not_eof(c); }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

double CpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct Medians {
  double wall_ms, cpu_ms;
};

Medians Median(int rounds, const std::function<std::size_t()>& f, std::size_t* bytes) {
  std::vector<double> wall, cpu;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    double c0 = CpuMs();
    *bytes = f();
    cpu.push_back(CpuMs() - c0);
    wall.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  int peers = argc > 1 ? std::atoi(argv[1]) : 1000;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 10;
  bool aggregate = argc > 3 && std::strcmp(argv[3], "--aggregate") == 0;
  if (peers < 1 || peers > 100000 || rounds < 1 || rounds > 1000) {
    std::fprintf(stderr, "usage: podnet-bench-serialize [PEERS] [ROUNDS] [--aggregate]\n");
    return 2;
  }
  Metrics m;
  auto& r = m.registry();
  auto& rtt = prometheus::BuildHistogram().Name("podnet_rtt_seconds").Help("RTT.").Register(r);
  std::vector<prometheus::Family<prometheus::Counter>*> counters;
  for (const char* name : {"podnet_rtt_packets_sent_total", "podnet_rtt_packets_received_total",
                           "podnet_rtt_duplicate_replies_total",
                           "podnet_rtt_reordered_replies_total", "podnet_rtt_late_replies_total"}) {
    counters.push_back(&prometheus::BuildCounter().Name(name).Help("Count.").Register(r));
  }
  podnet::topology::Self self{"bench", "bench-node", "bench-zone"};
  auto set = aggregate ? podnet::metrics::PeerLabelSet::kAggregated
                       : podnet::metrics::PeerLabelSet::kPerPeer;
  for (int i = 0; i < peers; ++i) {
    podnet::topology::Peer p;
    p.name = "lo-" + std::to_string(i + 1);
    p.node = "lo-node-" + std::to_string(i + 1);
    p.zone = "bench-zone";
    p.path = podnet::topology::PathClass::kSameZone;
    auto labels = podnet::metrics::PeerLabels(self, p, set);
    auto with_protocol = labels;
    with_protocol["protocol"] = "icmp";
    rtt.Add(with_protocol, podnet::metrics::LatencyBuckets()).Observe(1e-4 * (1 + i % 7));
    for (auto* c : counters) c->Add(with_protocol).Increment(i);
    auto with_probe = labels;
    with_probe["probe"] = "rtt";
    m.probe_sent_bytes().Add(with_probe).Increment(84.0 * i);
    m.probe_received_bytes().Add(with_probe).Increment(84.0 * i);
  }

  std::size_t bytes = 0;
  std::printf("%d peers%s, median of %d rounds\n", peers, aggregate ? " (aggregated)" : "", rounds);
  std::printf("%-16s %10s %10s %12s %14s\n", "step", "wall ms", "CPU ms", "bytes", "CPU x floor");
  double floor_cpu = 0;
  std::map<std::string, Medians> got;
  auto row = [&](const char* step, const std::function<std::size_t()>& f) {
    Medians m = Median(rounds, f, &bytes);
    got[step] = m;
    if (floor_cpu == 0 && std::strcmp(step, "library floor") == 0) floor_cpu = m.cpu_ms;
    std::printf("%-16s %10.1f %10.1f %12zu %14s\n", step, m.wall_ms, m.cpu_ms, bytes,
                floor_cpu > 0 ? std::to_string(m.cpu_ms / floor_cpu).substr(0, 5).c_str() : "-");
  };
  row("collect", [&] { return r.Collect().size(); });
  row("library floor", [&] {
    NullBuf buf;
    std::ostream out(&buf);
    prometheus::TextSerializer().Serialize(out, r.Collect());
    return std::size_t{0};
  });
  row("ostringstream", [&] {
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, r.Collect());
    return out.str().size();
  });
  row("writer", [&] {
    std::size_t n = 0;
    podnet::metrics::TextWriter([&n](std::string_view piece) {
      n += piece.size();
    }).Write(r.Collect());
    return n;
  });
  row("identity", [&] { return m.Serialize().size(); });
  row("gzip", [&] { return m.Serialize(Metrics::Encoding::kGzip).size(); });
  double identity = got["identity"].wall_ms, ratio = got["writer"].cpu_ms / floor_cpu;
  double collect = got["collect"].cpu_ms;
  double text_only = (got["writer"].cpu_ms - collect) / (floor_cpu - collect);
  std::printf("\ntarget: /metrics identity median <= 50 ms: %.1f ms  %s\n", identity,
              identity <= 50 ? "PASS" : "MISS");
  std::printf(
      "target: writer CPU <= 1/4 of TextSerializer's, Collect included: %.3f (1/%.1f)  %s\n", ratio,
      1 / ratio, ratio <= 0.25 ? "PASS" : "MISS");
  std::printf(
      "        the same, text only (Collect's median CPU taken from both): %.3f (1/%.1f)  %s\n",
      text_only, 1 / text_only, text_only <= 0.25 ? "PASS" : "MISS");
  return 0;
}
