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
//   identity       metrics::Metrics::Serialize() (/metrics without gzip)
//   gzip           metrics::Metrics::Serialize(kGzip) (/metrics as Prometheus asks for it)
// Usage: podnet-bench-serialize [PEERS=1000] [ROUNDS=10] [--aggregate]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include <prometheus/text_serializer.h>

#include "exporter/metrics/buckets.h"
#include "exporter/metrics/metrics.h"

namespace {

using podnet::metrics::Metrics;

class NullBuf : public std::streambuf {
 protected:
  int_type overflow(int_type c) override { return traits_type::not_eof(c); }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

double MedianMs(int rounds, const std::function<std::size_t()>& f, std::size_t* bytes) {
  std::vector<double> ms;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    *bytes = f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
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
  podnet::config::Self self{"bench", "bench-node", "bench-zone"};
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
  std::printf("%d peers%s, median of %d rounds\n", peers, aggregate ? " (aggregated)" : "",
              rounds);
  std::printf("%-16s %10s %12s %10s\n", "step", "ms", "bytes", "x floor");
  double floor_ms = 0;
  auto row = [&](const char* step, const std::function<std::size_t()>& f) {
    double ms = MedianMs(rounds, f, &bytes);
    if (floor_ms == 0 && std::strcmp(step, "library floor") == 0) floor_ms = ms;
    std::printf("%-16s %10.1f %12zu %10s\n", step, ms, bytes,
                floor_ms > 0 ? std::to_string(ms / floor_ms).substr(0, 4).c_str() : "-");
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
  row("identity", [&] { return m.Serialize().size(); });
  row("gzip", [&] { return m.Serialize(Metrics::Encoding::kGzip).size(); });
  return 0;
}
