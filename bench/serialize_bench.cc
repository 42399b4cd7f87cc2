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
//   protobuf       Serialize(kIdentity, kProtobuf) (/metrics in the protobuf exposition)
//   protobuf gzip  Serialize(kGzip, kProtobuf) (as Prometheus with native histograms asks)
// With --native, the RTT histograms also carry native buckets (metrics.native_histograms), which
// only protobuf sends. Each peer's histogram holds 50 samples spread ±20 % around its median.
// Each row: median wall ms and median CPU ms (this process's CPU clock; single-threaded), and
// CPU as a fraction of the library floor's. Targets (issue 11): identity median <= 50 ms;
// writer CPU <= 1/4 of the library floor's.
// Usage: podnet-bench-serialize [PEERS=1000] [ROUNDS=10] [--aggregate] [--native]
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
#include "exporter/metrics/families.h"
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
  bool aggregate = false, native = false, bad = false;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--aggregate") == 0) {
      aggregate = true;
    } else if (std::strcmp(argv[i], "--native") == 0) {
      native = true;
    } else {
      bad = true;
    }
  }
  if (bad || peers < 1 || peers > 100000 || rounds < 1 || rounds > 1000) {
    std::fprintf(stderr,
                 "usage: podnet-bench-serialize [PEERS] [ROUNDS] [--aggregate] [--native]\n");
    return 2;
  }
  Metrics m;
  auto& r = m.registry();
  m.SetNativeHistograms(native);
  auto rtt = podnet::metrics::DeclareHistogram(m, "podnet_rtt_seconds", "RTT.",
                                               podnet::metrics::LatencyBuckets());
  podnet::metrics::SeriesSet series(m.series_refs());
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
    auto h = series.Add(rtt, with_protocol);
    for (int k = 0; k < 50; ++k) h.Observe(1e-4 * (1 + i % 7) * (0.8 + 0.4 * k / 49));
    for (auto* c : counters) c->Add(with_protocol).Increment(i);
    auto with_probe = labels;
    with_probe["probe"] = "rtt";
    m.probe_sent_bytes().Add(with_probe).Increment(84.0 * i);
    m.probe_received_bytes().Add(with_probe).Increment(84.0 * i);
  }

  std::size_t bytes = 0;
  std::printf("%d peers%s%s, median of %d rounds\n", peers, aggregate ? " (aggregated)" : "",
              native ? " (native histograms)" : "", rounds);
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
  row("protobuf",
      [&] { return m.Serialize(Metrics::Encoding::kIdentity, Metrics::Format::kProtobuf).size(); });
  row("protobuf gzip",
      [&] { return m.Serialize(Metrics::Encoding::kGzip, Metrics::Format::kProtobuf).size(); });
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
