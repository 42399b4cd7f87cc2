#include "exporter/report/cost.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "exporter/app/cost_inputs.h"
#include "exporter/app/series_check.h"
#include "exporter/config/config.h"
#include "exporter/net/http_client.h"
#include "exporter/report/report.h"
#include "podnet/version.h"

namespace podnet::report {
namespace {

// The deploy default's probes (deploy/kubernetes/base/podnet.yaml) with static peers: this Pod in
// zone-a, one more Pod there, two in zone-b and one in zone-c.
constexpr char kStaticConfig[] = R"(
self: { name: me, node: node-1, zone: zone-a }
peers:
  static:
    - { name: p2, address: 10.0.0.2, node: node-2, zone: zone-a }
    - { name: p3, address: 10.0.0.3, node: node-3, zone: zone-b }
    - { name: p4, address: 10.0.0.4, node: node-4, zone: zone-b }
    - { name: p5, address: 10.0.0.5, node: node-5, zone: zone-c }
probes:
  rtt: { protocol: icmp, interval: 10s, count: 20, spacing: 50ms, timeout: 1s }
  http: { interval: 30s, duration: 1s, qps: 20, connections: 2, modes: [keepalive, new_connection] }
  grpc: { interval: 30s, count: 10, spacing: 100ms, timeout: 1s, port: 9480 }
  burst: { interval: 1h, duration: 1s, streams: [1, 4], max_bytes_per_hour: 4GB }
)";

// The same probes with Kubernetes discovery: bursts coordinated per zone pair.
constexpr char kKubernetesConfig[] = R"(
self: { name: me, node: node-1, zone: zone-a }
peers:
  kubernetes: { namespace: podnet, service: podnet, peers_per_zone: 3 }
probes:
  rtt: { protocol: icmp, interval: 10s, count: 20, spacing: 50ms, timeout: 1s }
  burst: { interval: 1h, duration: 1s, streams: [1, 4], max_bytes_per_hour: 4GB, coordinated: { period: 6h, max_bytes_per_burst: 500MB } }
)";

config::Config Parsed(const char* text) {
  auto r = config::Parse(text, "test.yaml", [](const std::string&) { return std::nullopt; });
  for (const auto& e : r.errors) ADD_FAILURE() << e.ToString();
  return r.ok() ? *r.config : config::Config{};
}

const CostLine* Line(const ClusterCost& c, const std::string& probe, const std::string& path) {
  for (const auto& l : c.lines) {
    if (l.probe == probe && l.path_class == path) return &l;
  }
  return nullptr;
}

double Seconds(config::Duration d) { return std::chrono::duration<double>(d).count(); }

TEST(ClusterCostTest, StaticPeersByHandFromTheConfig) {
  config::Config c = Parsed(kStaticConfig);
  CostInputs in = app::CostInputsOf(c, nullptr, 0.02);
  // N: the 4 static peers and this Pod; Z: zone-a, zone-b, zone-c.
  EXPECT_EQ(in.pods, static_cast<int>(c.static_peers.size()) + 1);
  EXPECT_EQ(in.zones, 3);
  // --config.check's arithmetic: the same figure it prints for this configuration.
  ASSERT_TRUE(in.series_per_pod);
  EXPECT_EQ(*in.series_per_pod, app::SeriesPerPod(c));
  // This Pod's peers, as the run's targets would classify them: 1 same zone, 3 cross zone.
  PeersByClass peers;
  for (const char* kind : {"rtt", "http", "grpc", "burst"}) {
    peers[kind] = {{"same_zone", 1}, {"cross_zone", 3}};
  }
  ClusterCost cost = ComputeClusterCost(in, peers, {});

  // RTT: count echo requests and replies per round of IPv4 20 + ICMP 8 + size bytes each.
  const auto& rtt = *c.rtt;
  double rtt_round = rtt.count * 2.0 * (20 + 8 + rtt.size);  // 20 × 2 × 84 = 3,360
  double rtt_hour = rtt_round * 3600 / Seconds(rtt.interval);
  const CostLine* r = Line(cost, "rtt", "cross_zone");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->peers.value_or(-1), 3);
  EXPECT_DOUBLE_EQ(r->pod_bytes_per_hour, 3 * rtt_hour);
  EXPECT_DOUBLE_EQ(r->cluster_bytes_per_month, in.pods * 3 * rtt_hour * 720);
  EXPECT_DOUBLE_EQ(r->cluster_usd_per_month, r->cluster_bytes_per_month / 1e9 * 0.02);
  EXPECT_DOUBLE_EQ(Line(cost, "rtt", "same_zone")->cluster_usd_per_month, 0);

  // HTTP, written out: the request and the /echo answer as text, then the TCP segments.
  const auto& h = *c.http;
  std::string node(in.node_name_bytes, 'n'), zone(in.zone_name_bytes, 'z');
  auto request = [&](bool close) {
    return std::string("GET ") + h.path + " HTTP/1.1\r\nHost: 10.0.123.45:9479\r\n" +
           "User-Agent: podnet-exporter/" + std::string(kVersion) + "\r\n" +
           (close ? "Connection: close\r\n" : "") + "\r\n";
  };
  auto answer = [&](bool close) {
    return "HTTP/1.1 200 OK\r\nServer: podnet-exporter\r\n"
           "Content-Type: text/plain; charset=utf-8\r\nPodnet-Node: " +
           node + "\r\nPodnet-Zone: " + zone + "\r\nContent-Length: 75\r\n" +
           (close ? "Connection: close\r\n" : "") + "\r\n" + std::string(75, '.');
  };
  double seg = 20 + 32, syn = 20 + 40;  // IPv4 + TCP with timestamps; SYNs with options
  double open = 2 * syn + seg, close = 4 * seg;
  double requests = Seconds(h.duration) * h.qps;  // per mode
  double keepalive = h.connections * (open + close) +
                     requests * (3 * seg + request(false).size() + answer(false).size());
  double fresh = requests * (open + 3 * seg + request(true).size() + answer(true).size() + close);
  ASSERT_TRUE(in.config.http);
  EXPECT_DOUBLE_EQ(HttpRoundBytes(*in.config.http, in.node_name_bytes, in.zone_name_bytes),
                   keepalive + fresh);
  EXPECT_DOUBLE_EQ(Line(cost, "http", "same_zone")->pod_bytes_per_hour,
                   (keepalive + fresh) * 3600 / Seconds(h.interval));

  // Bursts per peer (static peers: not coordinated): the hour's budget, shared 1 : 3.
  const auto& b = *c.burst;
  double budget = static_cast<double>(b.max_bytes_per_hour) * 1.06;
  EXPECT_DOUBLE_EQ(Line(cost, "burst", "cross_zone")->pod_bytes_per_hour, budget * 3 / 4);
  EXPECT_DOUBLE_EQ(Line(cost, "burst", "same_zone")->pod_bytes_per_hour, budget * 1 / 4);

  // The cluster's cross-zone total is every kind's, priced.
  double cross = 0;
  for (const char* kind : {"rtt", "http", "grpc", "burst"}) {
    cross += Line(cost, kind, "cross_zone")->cluster_bytes_per_month;
  }
  EXPECT_DOUBLE_EQ(cost.cross_zone_bytes_per_month, cross);
  EXPECT_DOUBLE_EQ(cost.cross_zone_usd_per_month, cross / 1e9 * 0.02);
  EXPECT_DOUBLE_EQ(Line(cost, "all", "cross_zone")->cluster_usd_per_month,
                   cost.cross_zone_usd_per_month);
}

TEST(ClusterCostTest, CoordinatedBurstsAreBoundedPerZonePairWhateverTheNodeCount) {
  config::Config c = Parsed(kKubernetesConfig);
  const auto& b = *c.burst;
  const double periods = 720 * 3600 / Seconds(b.coordinated.period);  // 120 at 6 h
  const double burst = static_cast<double>(b.coordinated.max_bytes_per_burst) * 1.06;
  double previous = -1;
  for (int n : {30, 300}) {
    std::vector<topology::Peer> pods;
    for (int i = 0; i < n; ++i) {
      topology::Peer p;
      p.name = "podnet-" + std::to_string(i);
      p.node = "node-" + std::to_string(i);
      p.zone = std::string("zone-") + "abc"[i % 3];
      pods.push_back(p);
    }
    CostInputs in = app::CostInputsOf(c, &pods, 0.02);
    EXPECT_EQ(in.pods, n);
    EXPECT_EQ(in.zones, 3);
    ClusterCost cost = ComputeClusterCost(in, {{"rtt", {{"cross_zone", 6}}}}, {});
    const double z = 3, streams = static_cast<double>(b.streams.size());
    const CostLine* cross = Line(cost, "burst", "cross_zone");
    ASSERT_TRUE(cross);
    // 6 ordered pairs × 2 stream counts × 120 periods × 530 MB = 763.2 GB a month.
    EXPECT_DOUBLE_EQ(cross->cluster_bytes_per_month, z * (z - 1) * streams * periods * burst);
    EXPECT_DOUBLE_EQ(cross->pod_bytes_per_hour, cross->cluster_bytes_per_month / 720 / n);
    EXPECT_DOUBLE_EQ(Line(cost, "burst", "same_zone")->cluster_bytes_per_month,
                     z * streams * periods * burst);
    if (previous >= 0) {
      EXPECT_DOUBLE_EQ(cross->cluster_bytes_per_month, previous);
    }
    previous = cross->cluster_bytes_per_month;
    // RTT grows with N: every Pod probes its 6 cross-zone peers.
    double rtt_hour = c.rtt->count * 2.0 * (20 + 8 + c.rtt->size) * 3600 / 10;
    EXPECT_DOUBLE_EQ(Line(cost, "rtt", "cross_zone")->cluster_bytes_per_month,
                     n * 6 * rtt_hour * 720);
  }
}

// probes.dns.sample: the lookups run on pods_per_zone Pods of each zone, so their load on the
// cluster DNS is the same at 30 and at 3,000 nodes; without it, every Pod's.
TEST(ClusterCostTest, SampledDnsLookupsCostTheSameWhateverTheNodeCount) {
  CostInputs in;
  in.zones = 3;
  in.config.dns = CostConfig::Dns{30, {"kubernetes.default", "example.com"}, {"glibc", "musl"}, 2};
  // Under kubelet's search list and ndots:5 (the DNS table's figures): 6 questions for a name
  // that walks 3 domains, 2 absolute.
  QuestionsPerLookup q;
  for (const char* name : {"kubernetes.default", "example.com"}) {
    for (const char* libc : {"glibc", "musl"}) {
      q[{name, "as_written", libc}] = 6;
      q[{name, "absolute", libc}] = 2;
    }
  }
  const double round = DnsRoundBytes(*in.config.dns, q);
  EXPECT_DOUBLE_EQ(DnsRoundQuestions(*in.config.dns, q), 2 * 2 * (6 + 2));
  for (int nodes : {30, 300, 3000}) {
    in.pods = nodes;
    ClusterCost sampled = ComputeClusterCost(in, {}, q);
    const CostLine* dns = Line(sampled, "dns", "unknown");
    ASSERT_TRUE(dns);
    // 2 Pods in each of 3 zones, 120 rounds an hour each.
    EXPECT_DOUBLE_EQ(dns->cluster_bytes_per_month, 6 * round * 120 * 720) << nodes;
    EXPECT_DOUBLE_EQ(dns->pod_bytes_per_hour, 6 * round * 120 / nodes) << nodes;
    std::string how = sampled.arithmetic.back();
    EXPECT_NE(how.find("6 of " + std::to_string(nodes) + " Pods"), std::string::npos) << how;
    EXPECT_NE(how.find("6.4 questions/s"), std::string::npos) << how;  // 6 × 32 / 30 s

    in.config.dns->sample_pods_per_zone = 0;  // every Pod
    ClusterCost every = ComputeClusterCost(in, {}, q);
    EXPECT_DOUBLE_EQ(Line(every, "dns", "unknown")->cluster_bytes_per_month,
                     nodes * round * 120 * 720);
    in.config.dns->sample_pods_per_zone = 2;
  }
  // Fewer Pods than the sample asks for: every Pod, not more.
  in.pods = 4;
  EXPECT_DOUBLE_EQ(Line(ComputeClusterCost(in, {}, q), "dns", "unknown")->cluster_bytes_per_month,
                   4 * round * 120 * 720);
}

// The path-MTU round as the probe sends it to a healthy path (measured on loopback by
// MtuProbeTest: 9001 + 9001 sent, 52 + 9001 received).
TEST(ClusterCostTest, PathMtuRoundIsThreeFullSizeDatagramsAndOneSmall) {
  EXPECT_EQ(MtuRoundBytes({600, 9001}), 3 * 9001 + 52);
  EXPECT_EQ(MtuRoundBytes({600, 1500}), 3 * 1500 + 52);
  CostInputs in;
  in.config.mtu = CostConfig::Mtu{600, 9001};
  in.pods = 10;
  in.zones = 2;
  ClusterCost c = ComputeClusterCost(in, {{"mtu", {{"cross_zone", 3}}}}, {});
  ASSERT_EQ(c.lines.size(), 2u);  // mtu, then the "all" line
  EXPECT_EQ(c.lines[0].probe, "mtu");
  EXPECT_NEAR(c.lines[0].pod_bytes_per_hour, 3 * 6 * 27055.0, 1);
}

TEST(ClusterCostTest, HttpRequestIsTheSizeTheProbeSends) {
  // The request the probe writes on a real connection, against the arithmetic's: they differ by
  // the Host value only ("127.0.0.1:PORT" here, 16 bytes counted).
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  auto endpoint = acceptor.local_endpoint();
  std::string host = "127.0.0.1:" + std::to_string(endpoint.port());
  CostConfig::Http http;
  http.path = "/echo";
  for (bool keep_alive : {true, false}) {
    auto conn =
        std::make_shared<net::http_client::HttpConnection>(io, endpoint, host, http.path, 65536);
    boost::asio::ip::tcp::socket server(io);
    boost::asio::streambuf got;
    const std::string reply = "HTTP/1.1 204 No Content\r\n\r\n";
    boost::system::error_code server_ec;
    // The server reads the request once it has accepted, then answers.
    acceptor.async_accept(server, [&](boost::system::error_code ec) {
      if ((server_ec = ec)) return;
      boost::asio::async_read_until(
          server, got, "\r\n\r\n", [&](boost::system::error_code ec, std::size_t) {
            if ((server_ec = ec)) return;
            boost::asio::write(server, boost::asio::buffer(reply), server_ec);
          });
    });
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::size_t sent = 0;
    bool done = false;
    auto failure = net::http_client::Failure::kNone;
    conn->Connect(deadline, [&](net::http_client::Failure f, auto) {
      if ((failure = f) != net::http_client::Failure::kNone) {
        done = true;
        return;
      }
      conn->Request(keep_alive, deadline, [&](const net::http_client::Exchange& ex) {
        sent = ex.bytes_sent;
        failure = ex.failure;
        done = true;
      });
    });
    for (int i = 0; i < 500 && !done; ++i) io.run_for(std::chrono::milliseconds(10));
    // Every pending operation ends here, while what its handler touches still exists.
    conn->Close();
    acceptor.cancel();
    server.close();
    io.restart();
    io.poll();
    io.restart();
    ASSERT_TRUE(done);
    EXPECT_FALSE(server_ec) << server_ec.message();
    EXPECT_EQ(failure, net::http_client::Failure::kNone);
    ASSERT_GT(sent, 0u);
    EXPECT_EQ(sent, got.size());
    EXPECT_DOUBLE_EQ(static_cast<double>(sent),
                     HttpRequestBytes(http, !keep_alive) - 16 + static_cast<double>(host.size()))
        << (keep_alive ? "keep-alive" : "close");
  }
}

TEST(ClusterCostTest, ReportSectionRoundTripsAndPrintsSeriesOnlyWhenGiven) {
  RunInfo run;
  run.self_name = "me";
  run.started = "2026-12-02T12:00:00Z";
  run.configured = {"rtt"};
  run.interval_seconds = {{"rtt", 10}};
  run.targets = {{"rtt", "p2", "same_zone", 1}, {"rtt", "p3", "cross_zone", 1}};
  CostInputs in;
  in.config.rtt = CostConfig::Rtt{false, 10, 20, 56};
  in.pods = 300;
  in.zones = 3;
  in.source = "Kubernetes discovery";
  run.cluster_cost = in;
  prometheus::Registry none;
  Report r = Build(none.Collect(), run);
  auto at = std::find_if(r.sections.begin(), r.sections.end(),
                         [](const Section& x) { return x.id == "cluster_cost"; });
  ASSERT_NE(at, r.sections.end());
  const Section& s = *at;
  double cross_month = 300 * RttRoundBytes(*in.config.rtt) * 360 * 720;
  bool found = false;
  for (const auto& row : s.rows) {
    if (row.key ==
        std::vector<std::pair<std::string, std::string>>{{"probe", "all"}, {"path_class", "all"}}) {
      found = true;
      EXPECT_EQ(row.figures.at("pods").value, 300);
      EXPECT_EQ(row.figures.at("zones").value, 3);
      EXPECT_FALSE(row.figures.count("series_per_pod"));
      EXPECT_DOUBLE_EQ(row.figures.at("cluster_usd_per_month").value, cross_month / 1e9 * 0.02);
    }
  }
  EXPECT_TRUE(found);
  std::string md = ToMarkdown(r);
  EXPECT_NE(md.find("## Cluster-wide probe traffic and cost"), std::string::npos);
  EXPECT_EQ(md.find("Series per Pod"), std::string::npos);

  // JSON: version unchanged (fields only added), and read back as it was written.
  nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["version"], 2);
  std::string error;
  auto back = FromJson(j, &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(ToJson(*back), j);

  run.cluster_cost->series_per_pod = 4785;
  md = ToMarkdown(Build(none.Collect(), run));
  EXPECT_NE(md.find("Series per Pod: 4785 (cluster: 1435500)"), std::string::npos);
}

}  // namespace
}  // namespace podnet::report
