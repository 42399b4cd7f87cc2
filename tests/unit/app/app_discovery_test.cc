// The whole App with Kubernetes discovery: a fake API server lists probe Pods at loopback
// addresses, the App selects and probes them (UDP echo to its own responder) and, when a Pod
// leaves the Service, stops probing it and removes its series; coordinated bursts choose among
// the Pods it lists (real burst responders on 127.0.0.x).

#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "exporter/app/app.h"
#include "exporter/config/config.h"
#include "exporter/probes/burst/coordination.h"
#include "exporter/responders/burst_server.h"
#include "exporter/topology/burst_pairs.h"
#include "exporter/topology/sample.h"
#include "tests/unit/discovery/fake_api_server.h"
#include "tests/unit/discovery/fixtures.h"
#include "tests/unit/testing/loop.h"

namespace podnet::app {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using podnet::testing::EndpointJson;
using podnet::testing::EventJson;
using podnet::testing::Eventually;
using podnet::testing::FakeApiServer;
using podnet::testing::FakeRequest;
using podnet::testing::FakeResponse;
using podnet::testing::FakeStream;
using podnet::testing::ListJson;
using podnet::testing::SliceJson;
using podnet::testing::TempDir;

// A port free right now on 127.0.0.1 for both TCP and UDP (the HTTP server and the UDP echo
// responder share the number).
std::uint16_t FreePort() {
  boost::asio::io_context io;
  for (int i = 0; i < 50; ++i) {
    boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    std::uint16_t port = a.local_endpoint().port();
    boost::system::error_code ec;
    boost::asio::ip::udp::socket u(io);
    u.open(boost::asio::ip::udp::v4());
    u.bind({boost::asio::ip::make_address("127.0.0.1"), port}, ec);
    if (!ec) return port;
  }
  return 0;
}

// GET http://127.0.0.1:port/target; "" on any failure. Asynchronous, so that the 2 s deadline
// holds (a blocking Beast read ignores tcp_stream's expiry).
std::string HttpGet(std::uint16_t port, const std::string& target, int* status = nullptr,
                    boost::beast::http::verb verb = boost::beast::http::verb::get) {
  namespace http = boost::beast::http;
  boost::asio::io_context io;
  boost::beast::tcp_stream s(io);
  http::request<http::empty_body> req(verb, target, 11);
  req.set(http::field::host, "127.0.0.1");
  boost::beast::flat_buffer buf;
  http::response<http::string_body> res;
  bool ok = false;
  s.expires_after(2s);
  s.async_connect(
      {boost::asio::ip::make_address("127.0.0.1"), port}, [&](boost::system::error_code ec) {
        if (ec) return;
        http::async_write(s, req, [&](boost::system::error_code ec, std::size_t) {
          if (ec) return;
          http::async_read(s, buf, res,
                           [&](boost::system::error_code ec, std::size_t) { ok = !ec; });
        });
      });
  io.run();
  if (!ok) return "";
  if (status) *status = res.result_int();
  return res.body();
}

// The fake API server's side of the Service: `list` (a ListJson body) for a list, and for each
// watch a stream held open, which the test may feed (Latest) or leave silent.
struct ServiceSlices {
  explicit ServiceSlices(std::string list_body) : list(std::move(list_body)) {}
  FakeResponse operator()(const FakeRequest& r) {
    if (r.target.find("watch=1") == std::string::npos) return FakeResponse{200, {}, list};
    std::lock_guard lock(mu);
    watches.push_back(std::make_shared<FakeStream>());
    return FakeResponse{200, {}, "", watches.back()};
  }
  // The latest watch once the App has opened one (within 2 s); nullptr if it has not.
  std::shared_ptr<FakeStream> Latest() {
    std::shared_ptr<FakeStream> w;
    Eventually([&] {
      std::lock_guard lock(mu);
      if (!watches.empty()) w = watches.back();
      return w != nullptr;
    });
    return w;
  }

  const std::string list;
  std::mutex mu;
  std::vector<std::shared_ptr<FakeStream>> watches;
};

// A kubeconfig in `dir` for the fake API server on 127.0.0.1:`port` (its CA in ca.crt next to
// it), with `user` as the user's entry (e.g. "{tokenFile: token}").
std::string WriteKubeconfig(const TempDir& dir, std::uint16_t port, const std::string& user) {
  dir.Write("ca.crt", podnet::testing::ServerCert().cert_pem);
  return dir.Write("kubeconfig",
                   "current-context: test\nclusters: [{name: t, cluster: {server: "
                   "\"https://127.0.0.1:" +
                       std::to_string(port) +
                       "\", certificate-authority: ca.crt}}]\n"
                       "contexts: [{name: test, context: {cluster: t, user: u}}]\n"
                       "users: [{name: u, user: " +
                       user + "}]\n");
}

// An App for the configuration file `path` and `kubeconfig`; nullptr (and a test failure) when
// the file does not load.
std::unique_ptr<App> MakeApp(const std::string& path, const std::string& kubeconfig) {
  auto loaded = config::LoadFile(path, config::ProcessEnv());
  EXPECT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors[0].ToString());
  if (!loaded.ok()) return nullptr;
  Options options;
  options.config_file = path;
  options.kubeconfig = kubeconfig;
  return std::make_unique<App>(options, loaded.config);
}

// An App whose peers.kubernetes Service the fake API server lists as `list` (ListJson), its
// HTTP server and UDP echo responder on a free loopback port; `config` gives the configuration
// file for that port. `app` is nullptr (and the test failed) when the file does not load.
struct DiscoveredApp {
  DiscoveredApp(std::string list, const std::function<std::string(std::uint16_t)>& config)
      : slices(std::move(list)),
        server([this](const FakeRequest& r) { return slices(r); }),
        kubeconfig(WriteKubeconfig(dir, server.port(), "{token: t}")),
        port(FreePort()) {
    EXPECT_NE(port, 0);
    app = MakeApp(dir.Write("podnet.yaml", config(port)), kubeconfig);
  }
  ServiceSlices slices;
  FakeApiServer server;
  TempDir dir;
  std::string kubeconfig;
  std::uint16_t port;
  std::unique_ptr<App> app;
};

// Runs App::Run on a thread; stops and joins it however the test ends.
class Running {
 public:
  explicit Running(App& app) : app_(app), thread_([this] { rc_ = app_.Run(); }) {}
  ~Running() { Join(); }
  int Join() {
    if (thread_.joinable()) {
      app_.Stop();
      thread_.join();
    }
    return rc_;
  }

 private:
  App& app_;
  int rc_ = -1;
  std::thread thread_;
};

TEST(AppDiscoveryTest, DiscoveredPeersAreProbedAndRemovedPeersLoseTheirSeries) {
  std::vector<json> endpoints = {EndpointJson("podnet-self", "127.0.0.1", "node-a", "zone-a"),
                                 EndpointJson("podnet-b", "127.0.0.1", "node-b", "zone-a"),
                                 EndpointJson("podnet-c", "127.0.0.1", "node-c", "zone-b")};
  ServiceSlices slices(ListJson("100", {SliceJson("podnet-abc12", "99", endpoints)}));
  FakeApiServer server([&](const FakeRequest& r) {
    if (r.authorization != "Bearer app-token") return FakeResponse{401, {}, "{}"};
    if (r.target == "/api/v1/nodes/node-a") {
      return FakeResponse{
          200,
          {},
          json{{"kind", "Node"},
               {"apiVersion", "v1"},
               {"metadata",
                {{"name", "node-a"}, {"labels", {{"topology.kubernetes.io/zone", "zone-a"}}}}}}
              .dump()};
    }
    return slices(r);
  });

  TempDir dir;
  dir.Write("token", "app-token\n");
  std::string kubeconfig = WriteKubeconfig(dir, server.port(), "{tokenFile: token}");
  std::uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  std::string p = std::to_string(port);
  auto config_text = [&](const std::string& peers) {
    return R"(
listen_address: "127.0.0.1:)" +
           p + R"("
self: {name: podnet-self, node: node-a, zone: ""}
responders:
  udp_echo: {listen_address: "127.0.0.1:)" +
           p + R"("}
peers:
)" + peers +
           R"(
probes:
  rtt: {protocol: udp, interval: 300ms, count: 2, spacing: 10ms, timeout: 100ms}
  service: {interval: 300ms, count: 2, spacing: 10ms, timeout: 100ms, targets: [
    {name: self-udp, address: 127.0.0.1, port: )" +
           p + R"(, protocol: udp},
    {name: self-http, address: 127.0.0.1, port: )" +
           p + R"(, protocol: http}]}
)";
  };
  std::string config_path =
      dir.Write("podnet.yaml", config_text("  kubernetes: {namespace: podnet, service: podnet, "
                                           "peers_per_zone: 3, port: " +
                                           p + "}"));
  auto app = MakeApp(config_path, kubeconfig);
  ASSERT_TRUE(app);
  Running running(*app);

  auto metrics = [&] { return HttpGet(port, "/metrics"); };
  auto has = [&](const std::string& needle) { return metrics().find(needle) != std::string::npos; };
  // The value of the first series whose line starts with `prefix`; -1 when there is none.
  auto value = [&](const std::string& prefix) {
    std::string m = metrics();
    auto at = m.find("\n" + prefix);
    if (at == std::string::npos) return -1.0;
    auto end = m.find('\n', at + 1);
    auto space = m.rfind(' ', end);
    return std::stod(m.substr(space + 1, end - space - 1));
  };
  // Both other Pods probed (echoes answered by this App's own responder), classified with the
  // zone read from the Node; never self.
  EXPECT_TRUE(Eventually(
      [&] {
        return value(R"(podnet_rtt_packets_received_total{path_class="same_zone",peer="node-b")") >
                   0 &&
               value(R"(podnet_rtt_packets_received_total{path_class="cross_zone",peer="node-c")") >
                   0;
      },
      8000ms))
      << metrics();
  std::string m = metrics();
  EXPECT_EQ(m.find(R"(peer="podnet-self")"), std::string::npos);
  EXPECT_NE(m.find(R"(source_zone="zone-a")"), std::string::npos);
  EXPECT_NE(m.find(R"(podnet_discovery_candidates{source="watch"} 3)"), std::string::npos);
  EXPECT_NE(m.find(R"(podnet_kubernetes_lists_total{resource="endpointslices"} 1)"),
            std::string::npos);
  int status = 0;
  HttpGet(port, "/-/ready", &status);
  EXPECT_EQ(status, 200);
  EXPECT_NE(HttpGet(port, "/podnet/info").find(R"("zone":"zone-a")"), std::string::npos);
  // The responders answer with the zone read from the Node too (self.zone is ""): the Service
  // probe's requests to this App's own UDP echo and /echo come back as same_node in zone-a.
  for (const char* service : {"self-udp", "self-http"}) {
    EXPECT_TRUE(Eventually(
        [&] {
          return value(std::string(R"(podnet_service_requests_total{backend_zone="zone-a",)") +
                       R"(path_class="same_node",service=")" + service + '"') > 0;
        },
        3000ms))
        << service << "\n"
        << metrics();
  }

  // podnet-c (on node-c) leaves the Service: its probes stop and its series go; podnet-b keeps
  // running. Peers are named after their nodes.
  std::shared_ptr<FakeStream> w = slices.Latest();
  ASSERT_TRUE(w);
  w->Push(EventJson("MODIFIED", SliceJson("podnet-abc12", "101", {endpoints[0], endpoints[1]})));
  EXPECT_TRUE(Eventually([&] { return !has(R"(peer="node-c")"); }, 3000ms)) << metrics();
  EXPECT_TRUE(has(R"(podnet_rtt_packets_received_total{path_class="same_zone",peer="node-b")"));
  EXPECT_TRUE(has(R"(podnet_peers{path_class="cross_zone"} 0)"));
  EXPECT_TRUE(has(R"(podnet_peers{path_class="same_zone"} 1)"));
  EXPECT_TRUE(
      has(R"(podnet_kubernetes_watch_events_total{resource="endpointslices",type="MODIFIED"} 1)"));

  // A reload to another Service whose credentials cannot be read fails like a bad file: the
  // running configuration and its discovery stay, and so do their peers.
  std::filesystem::rename(kubeconfig, kubeconfig + ".gone");
  dir.Write("podnet.yaml",
            config_text("  kubernetes: {namespace: podnet, service: other, port: " + p + "}"));
  status = 0;
  std::string answer = HttpGet(port, "/-/reload", &status, boost::beast::http::verb::post);
  EXPECT_EQ(status, 500) << answer;
  EXPECT_NE(answer.find("peers.kubernetes"), std::string::npos) << answer;
  EXPECT_TRUE(has("podnet_config_last_reload_successful 0"));
  const double before =
      value(R"(podnet_rtt_packets_received_total{path_class="same_zone",peer="node-b")");
  EXPECT_TRUE(Eventually(
      [&] {
        return value(R"(podnet_rtt_packets_received_total{path_class="same_zone",peer="node-b")") >
               before;
      },
      3000ms))
      << metrics();
  std::filesystem::rename(kubeconfig + ".gone", kubeconfig);

  // A reload without peers.kubernetes stops discovery: its peers go, the static one comes.
  dir.Write("podnet.yaml", config_text("  static: [{name: static-lo, address: 127.0.0.1, port: " +
                                       p + ", node: node-z, zone: zone-z}]"));
  status = 0;
  HttpGet(port, "/-/reload", &status, boost::beast::http::verb::post);
  EXPECT_EQ(status, 200);
  EXPECT_TRUE(
      Eventually([&] { return !has(R"(peer="node-b")") && has(R"(peer="static-lo")"); }, 3000ms))
      << metrics();
  // The zone read from the Node went with discovery: self.zone is "" again.
  EXPECT_TRUE(has(R"(path_class="unknown",peer="static-lo")")) << metrics();
  HttpGet(port, "/-/ready", &status);
  EXPECT_EQ(status, 200);
  // And the discovery's own series go with it.
  m = metrics();
  EXPECT_EQ(m.find("podnet_discovery_candidates"), std::string::npos) << m;
  EXPECT_EQ(m.find("podnet_kubernetes_"), std::string::npos) << m;

  EXPECT_EQ(running.Join(), 0);
}

TEST(AppDiscoveryTest, NotReadySaysWhyAndNoDiscoverySeriesWithoutKubernetes) {
  constexpr char kForbidden[] =
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
      R"("message":"endpointslices.discovery.k8s.io is forbidden: User \"system:anonymous\" )"
      R"(cannot list resource","reason":"Forbidden","code":403})";
  FakeApiServer server([&](const FakeRequest&) { return FakeResponse{403, {}, kForbidden}; });
  TempDir dir;
  std::string kubeconfig = WriteKubeconfig(dir, server.port(), "{token: t}");
  std::uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  std::string p = std::to_string(port);
  auto config_text = [&](const std::string& peers) {
    return "listen_address: \"127.0.0.1:" + p + "\"\nself: {name: s, node: node-a, zone: z}\n" +
           "responders: {udp_echo: {listen_address: \"127.0.0.1:" + p + "\"}}\npeers:\n" + peers;
  };
  std::string config_path =
      dir.Write("podnet.yaml", config_text("  kubernetes: {namespace: podnet, service: podnet}\n"));
  auto app = MakeApp(config_path, kubeconfig);
  ASSERT_TRUE(app);
  Running running(*app);

  // Not ready, and /-/ready says why: the first list is not done, and the API's own words.
  int status = 0;
  std::string body;
  ASSERT_TRUE(Eventually(
      [&] {
        body = HttpGet(port, "/-/ready", &status);
        return body.find("last error") != std::string::npos;
      },
      5000ms))
      << body;
  EXPECT_EQ(status, 503);
  EXPECT_NE(body.find("has not listed the EndpointSlices of service podnet/podnet"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("forbidden (HTTP 403): endpointslices.discovery.k8s.io is forbidden"),
            std::string::npos)
      << body;
  std::string m = HttpGet(port, "/metrics");
  EXPECT_NE(
      m.find(R"(podnet_kubernetes_api_errors_total{reason="forbidden",resource="endpointslices"})"),
      std::string::npos)
      << m;

  // Without peers.kubernetes: ready, and no discovery series at all.
  dir.Write("podnet.yaml",
            config_text("  static: [{name: lo, address: 127.0.0.1, node: n, zone: z}]\n"));
  HttpGet(port, "/-/reload", &status, boost::beast::http::verb::post);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(HttpGet(port, "/-/ready", &status), "Ready.\n");
  m = HttpGet(port, "/metrics");
  EXPECT_EQ(m.find("podnet_kubernetes_"), std::string::npos) << m;
  EXPECT_EQ(m.find("podnet_discovery_candidates"), std::string::npos) << m;
  EXPECT_EQ(running.Join(), 0);
}

// The cluster DNS watch (probes.dns.cluster_dns) is a second watch on the same metrics, counted
// apart (resource="dns_endpointslices"), and its failures never touch readiness or the peers.
TEST(AppDiscoveryTest, ForbiddenClusterDnsWatchLeavesPeersAndReadinessAlone) {
  constexpr char kForbidden[] =
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
      R"("message":"endpointslices.discovery.k8s.io is forbidden: User \"system:anonymous\" )"
      R"(cannot list resource in namespace kube-system","reason":"Forbidden","code":403})";
  std::mutex mu;
  std::vector<std::string> dns_targets;
  FakeApiServer server([&](const FakeRequest& r) {
    if (r.target.find("/namespaces/kube-system/") != std::string::npos) {
      std::lock_guard lock(mu);
      dns_targets.push_back(r.target);
      return FakeResponse{403, {}, kForbidden};
    }
    if (r.target.find("watch=1") != std::string::npos) {
      return FakeResponse{200, {}, "", std::make_shared<FakeStream>()};
    }
    return FakeResponse{
        200,
        {},
        ListJson("7", {SliceJson("podnet-x", "6", {EndpointJson("s", "127.0.0.1", "n", "z")})})};
  });
  TempDir dir;
  std::string kubeconfig = WriteKubeconfig(dir, server.port(), "{token: t}");
  std::string resolv = dir.Write("resolv.conf", "nameserver 127.0.0.1\noptions timeout:1\n");
  std::uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  std::string p = std::to_string(port);
  std::string config_path = dir.Write(
      "podnet.yaml", "listen_address: \"127.0.0.1:" + p +
                         "\"\nself: {name: s, node: n, zone: z}\n"
                         "responders: {udp_echo: {listen_address: \"127.0.0.1:" +
                         p +
                         "\"}}\npeers:\n  kubernetes: {namespace: podnet, service: podnet}\n"
                         "probes:\n  dns: {interval: 1s, resolvers: [glibc], names: [a.test], "
                         "resolv_conf: " +
                         resolv + ", cluster_dns: {namespace: kube-system, service: kube-dns}}\n");
  auto app = MakeApp(config_path, kubeconfig);
  ASSERT_TRUE(app);
  Running running(*app);

  std::string m;
  ASSERT_TRUE(Eventually(
      [&] {
        m = HttpGet(port, "/metrics");
        return m.find(R"(podnet_kubernetes_api_errors_total{reason="forbidden",)"
                      R"(resource="dns_endpointslices"})") != std::string::npos &&
               m.find(R"(podnet_kubernetes_lists_total{resource="endpointslices"} 1)") !=
                   std::string::npos;
      },
      5000ms))
      << m;
  {
    std::lock_guard lock(mu);
    ASSERT_FALSE(dns_targets.empty());
    EXPECT_EQ(dns_targets.front(),
              "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices"
              "?labelSelector=kubernetes.io%2Fservice-name%3Dkube-dns&resourceVersion=0");
  }
  int status = 0;
  EXPECT_EQ(HttpGet(port, "/-/ready", &status), "Ready.\n");
  EXPECT_EQ(status, 200);
  // The peers' watch counts alone under its resource; the DNS watch has listed nothing.
  EXPECT_NE(m.find(R"(podnet_kubernetes_lists_total{resource="dns_endpointslices"} 0)"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find(R"(reason="forbidden",resource="endpointslices")"), std::string::npos) << m;
  EXPECT_NE(m.find(R"(podnet_discovery_candidates{source="watch"} 1)"), std::string::npos) << m;

  // A reload that turns cluster_dns off stops the watch; its counters stay (the discovery
  // metrics are the peers' too) and no more requests reach kube-system.
  dir.Write(
      "podnet.yaml",
      "listen_address: \"127.0.0.1:" + p +
          "\"\nself: {name: s, node: n, zone: z}\n"
          "responders: {udp_echo: {listen_address: \"127.0.0.1:" +
          p +
          "\"}}\npeers:\n  kubernetes: {namespace: podnet, service: podnet}\n"
          "probes:\n  dns: {interval: 1s, resolvers: [glibc], names: [a.test], resolv_conf: " +
          resolv + ", cluster_dns: false}\n");
  HttpGet(port, "/-/reload", &status, boost::beast::http::verb::post);
  EXPECT_EQ(status, 200);
  std::size_t asked = 0;
  {
    std::lock_guard lock(mu);
    asked = dns_targets.size();
  }
  std::this_thread::sleep_for(1500ms);  // the watch's first retry is due within 1 s
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(dns_targets.size(), asked);
  }
  EXPECT_EQ(HttpGet(port, "/-/ready", &status), "Ready.\n");
  EXPECT_EQ(running.Join(), 0);
}

// One burst responder per discovered Pod, the i-th on 127.0.0.<i+1>, all on one port (the
// peers.kubernetes.burst_port every Pod shares), each counting into a registry of its own: the
// Pod a burst went to is the responder that served it. `port` is 0 when no port was free on
// every address.
struct PodResponders {
  explicit PodResponders(std::size_t pods) {
    for (int attempt = 0; attempt < 20 && servers.size() < pods; ++attempt) {
      servers.clear();
      registries.clear();
      port = 0;
      try {
        for (std::size_t i = 0; i < pods; ++i) {
          config::kinds::burst::BurstResponderOptions o;
          o.any_client = true;  // other Pods' responders: the App under test is their client
          o.listen_address = {boost::asio::ip::make_address("127.0.0." + std::to_string(i + 1)),
                              port};
          registries.push_back(std::make_unique<prometheus::Registry>());
          servers.push_back(std::make_unique<responders::BurstResponder>(o, *registries.back()));
          port = servers.back()->port();
        }
      } catch (const boost::system::system_error&) {
        port = 0;  // the port is taken on one of the addresses: another port
      }
    }
  }
  // Tests the i-th Pod's responder was asked for, whatever their result.
  double Requests(std::size_t i) const {
    double n = 0;
    for (const auto& family : registries[i]->Collect()) {
      if (family.name != "podnet_responder_requests_total") continue;
      for (const auto& m : family.metric) n += m.counter.value;
    }
    return n;
  }
  double Completed(std::size_t i) const {
    return podnet::testing::CounterValue(*registries[i], "podnet_responder_requests_total",
                                         {{"responder", "burst"}, {"result", "completed"}});
  }

  std::uint16_t port = 0;
  std::vector<std::unique_ptr<prometheus::Registry>> registries;  // outlive the servers
  std::vector<std::unique_ptr<responders::BurstResponder>> servers;
};

// One coordinated-burst period for the next decades: the App and a test compute the same
// period number.
constexpr std::chrono::hours kBurstPeriod{1'000'000};

// The App's configuration for coordinated bursts among the Pods the fake API server lists, on
// loopback: this Pod `self` (a YAML flow map), HTTP and UDP echo on `port`, the peers' burst
// responders on `burst_port`; every second a round of 100 ms of data capped at 1 MB (loopback
// sends that in a few ms), in one period (kBurstPeriod).
std::string CoordinatedBurstConfig(const std::string& self, std::uint16_t port,
                                   std::uint16_t burst_port) {
  const std::string p = std::to_string(port);
  return "listen_address: \"127.0.0.1:" + p + "\"\nself: " + self +
         "\nresponders: {udp_echo: {listen_address: \"127.0.0.1:" + p +
         "\"}}\npeers:\n  kubernetes: {namespace: podnet, service: podnet, peers_per_zone: 1, "
         "port: " +
         p + ", burst_port: " + std::to_string(burst_port) +
         "}\nprobes:\n  burst: {interval: 1s, duration: 100ms, streams: [1], timeout: 200ms, "
         "coordinated: {period: " +
         std::to_string(kBurstPeriod.count()) + "h, max_bytes_per_burst: 1MB}}\n";
}

// Coordinated bursts in the whole App: the Pod list the fake API server gives (this Pod and six
// peers in three zones, on 127.0.0.1-7) is what the burst kind chooses among. Expected: per
// ordered zone pair (own zone -> each zone) what topology::ChooseBurstPair picks for that very
// list — this Pod bursts to the chosen peer where it is the prober and counts the others as
// not_chosen — and, the Pod being in its own list, no not_listed skip. peers_per_zone: 1 keeps
// the probed peers fewer than the Pods: the choice is among every discovered Pod, self included.
TEST(AppDiscoveryTest, CoordinatedBurstsChooseAmongTheDiscoveredPods) {
  struct Pod {
    std::string name, node, zone;
  };
  std::vector<Pod> pods = {{"podnet-s", "", "zone-a"},         {"podnet-a2", "node-a2", "zone-a"},
                           {"podnet-a3", "node-a3", "zone-a"}, {"podnet-b1", "node-b1", "zone-b"},
                           {"podnet-b2", "node-b2", "zone-b"}, {"podnet-c1", "node-c1", "zone-c"},
                           {"podnet-c2", "node-c2", "zone-c"}};
  const std::uint64_t period =
      topology::PeriodNumber(std::chrono::system_clock::now(), kBurstPeriod);
  // What ChooseBurstPair picks for this Pod (pods[0]) on node `self_node`: the peer it bursts
  // to, by peer zone, and how many pairs another Pod probes. The list's names are the nodes'
  // (discovery names probe Pods after their nodes).
  std::vector<std::string> zones;
  std::map<std::string, std::size_t> bursts;  // peer zone -> index into pods
  std::size_t not_chosen = 0;
  auto expect_for = [&](const std::string& self_node) {
    pods[0].name = "podnet-s";
    pods[0].node = self_node;
    std::vector<topology::Peer> list;
    for (const auto& p : pods) {
      list.emplace_back();
      list.back().name = p.node;
      list.back().node = p.node;
      list.back().zone = p.zone;
    }
    zones = topology::ZonesOf(list);
    bursts.clear();
    not_chosen = 0;
    for (const auto& zone : zones) {
      // Keyed by the Service's UID, which discovery reads from the slices' controller owner
      // reference (tests/unit/discovery/fixtures.h: "svc-uid").
      auto pair = topology::ChooseBurstPair(period, pods[0].zone, zone, list, "svc-uid");
      if (!pair) continue;
      if (pair->prober == 0) {
        bursts[zone] = pair->peer;
      } else {
        ++not_chosen;
      }
    }
  };
  // A node name for this Pod that is the prober of some of its pairs and not of others, so that
  // both outcomes are checked (the hashes are deterministic: found by looking).
  bool mixed = false;
  for (int i = 0; i < 100 && !mixed; ++i) {
    expect_for("node-s" + std::to_string(i));
    mixed = !bursts.empty() && not_chosen > 0;
  }
  ASSERT_TRUE(mixed);
  std::string expected = pods[0].name + " bursts to";
  for (const auto& [zone, peer] : bursts) expected += " " + pods[peer].name;
  SCOPED_TRACE(expected + ", not_chosen " + std::to_string(not_chosen));

  PodResponders burst_responders(pods.size());
  ASSERT_NE(burst_responders.port, 0);
  std::vector<json> endpoints;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    endpoints.push_back(
        EndpointJson(pods[i].name, "127.0.0." + std::to_string(i + 1), pods[i].node, pods[i].zone));
  }
  ServiceSlices slices(ListJson("100", {SliceJson("podnet-abc12", "99", endpoints)}));
  FakeApiServer server([&](const FakeRequest& r) { return slices(r); });
  TempDir dir;
  std::string kubeconfig = WriteKubeconfig(dir, server.port(), "{token: t}");
  std::uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  std::string config_path = dir.Write(
      "podnet.yaml", CoordinatedBurstConfig("{name: " + pods[0].name + ", node: " + pods[0].node +
                                                ", zone: " + pods[0].zone + "}",
                                            port, burst_responders.port));
  auto app = MakeApp(config_path, kubeconfig);
  ASSERT_TRUE(app);
  auto& registry = app->metrics().registry();
  using podnet::testing::CounterValue;
  using podnet::testing::FindSeries;
  const prometheus::Labels not_chosen_skips{{"reason", "not_chosen"}};
  auto burst_to = [](const std::string& zone) {
    return prometheus::Labels{{"peer_zone", zone}, {"streams", "1"}};
  };
  auto rounds = [&] {
    auto h = FindSeries(registry, "podnet_probe_round_start_delay_seconds", {{"probe", "burst"}});
    return h ? h->histogram.sample_count : 0;
  };
  {
    Running running(*app);
    // Every pair decided: the chosen peers' responders served their burst, the skips counted.
    bool decided = Eventually(
        [&] {
          for (const auto& [zone, peer] : bursts) {
            if (burst_responders.Completed(peer) < 1 ||
                !FindSeries(registry, "podnet_burst_sent_bytes_total", burst_to(zone))) {
              return false;
            }
          }
          return FindSeries(registry, "podnet_burst_pairs_skipped_total", not_chosen_skips)
              .has_value();
        },
        8000ms);
    // And one round more, which has nothing left to decide in this period.
    const auto after = rounds();
    EXPECT_TRUE(decided && Eventually([&] { return rounds() > after; }, 3000ms))
        << "rounds " << rounds();
    auto candidates = FindSeries(registry, "podnet_discovery_candidates", {{"source", "watch"}});
    ASSERT_TRUE(candidates);
    EXPECT_EQ(candidates->gauge.value, static_cast<double>(pods.size()));
    EXPECT_EQ(running.Join(), 0);
  }
  EXPECT_EQ(CounterValue(registry, "podnet_burst_pairs_skipped_total", not_chosen_skips),
            static_cast<double>(not_chosen));
  EXPECT_FALSE(
      FindSeries(registry, "podnet_burst_pairs_skipped_total", {{"reason", "not_listed"}}));
  for (const auto& zone : zones) {
    auto sent = FindSeries(registry, "podnet_burst_sent_bytes_total", burst_to(zone));
    if (!bursts.count(zone)) {
      EXPECT_FALSE(sent) << zone;
      continue;
    }
    ASSERT_TRUE(sent) << zone;
    EXPECT_GT(sent->counter.value, 0) << zone;
    EXPECT_LE(sent->counter.value, 1'000'000) << zone;  // max_bytes_per_burst
  }
  // Exactly the chosen peers were burst to, once each (one stream count, one period).
  for (std::size_t i = 0; i < pods.size(); ++i) {
    bool chosen = false;
    for (const auto& [zone, peer] : bursts) chosen = chosen || peer == i;
    EXPECT_EQ(burst_responders.Requests(i), chosen ? 1 : 0) << pods[i].name;
    EXPECT_EQ(burst_responders.Completed(i), chosen ? 1 : 0) << pods[i].name;
  }
  // Per zone pair, never per peer: the series name no peer.
  for (const auto& family : registry.Collect()) {
    if (family.name.rfind("podnet_burst_", 0) != 0) continue;
    for (const auto& m : family.metric) {
      for (const auto& l : m.label) EXPECT_NE(l.name, "peer") << family.name;
    }
  }
}

// A node pool kept out of bursts, in the whole App: this Pod (zone-a) and podnet-c1 (zone-c) are
// in a slice with the Service's `burst` port, podnet-b1 (zone-b, alone there) in one without it
// (the pool's DaemonSet declares no burst container port). This Pod bursts to zone-c and not to
// zone-b: b1, the only Pod of zone-b, would be its certain peer if the pool were not left out.
TEST(AppDiscoveryTest, APodInASliceWithoutTheBurstPortIsNeverBurstTo) {
  PodResponders burst_responders(3);  // 127.0.0.1 this Pod, .2 podnet-b1, .3 podnet-c1
  ASSERT_NE(burst_responders.port, 0);
  auto with_ports = [](json slice, std::vector<std::string> names) {
    slice["ports"] = json::array();
    for (const auto& n : names) slice["ports"].push_back({{"name", n}, {"port", 1}});
    return slice;
  };
  DiscoveredApp d(
      ListJson("100",
               {with_ports(SliceJson("podnet-abc12", "99",
                                     {EndpointJson("podnet-s", "127.0.0.1", "node-s", "zone-a"),
                                      EndpointJson("podnet-c1", "127.0.0.3", "node-c1", "zone-c")}),
                           {"http", "burst"}),
                with_ports(SliceJson("podnet-pool1", "99",
                                     {EndpointJson("podnet-b1", "127.0.0.2", "node-b1", "zone-b")}),
                           {"http"})}),
      [&](std::uint16_t port) {
        return CoordinatedBurstConfig("{name: podnet-s, node: node-s, zone: zone-a}", port,
                                      burst_responders.port);
      });
  ASSERT_TRUE(d.app);
  App* app = d.app.get();
  auto& registry = app->metrics().registry();
  auto rounds = [&] {
    auto h = podnet::testing::FindSeries(registry, "podnet_probe_round_start_delay_seconds",
                                         {{"probe", "burst"}});
    return h ? h->histogram.sample_count : 0;
  };
  {
    Running running(*app);
    EXPECT_TRUE(Eventually([&] { return burst_responders.Completed(2) >= 1; }, 8000ms));
    const auto after = rounds();  // and one more round: nothing left to decide this period
    EXPECT_TRUE(Eventually([&] { return rounds() > after; }, 3000ms)) << "rounds " << rounds();
    EXPECT_EQ(running.Join(), 0);
  }
  EXPECT_EQ(burst_responders.Requests(1), 0) << "podnet-b1, in the pool";
  EXPECT_EQ(burst_responders.Completed(2), 1) << "podnet-c1";
  EXPECT_FALSE(podnet::testing::FindSeries(registry, "podnet_burst_sent_bytes_total",
                                           {{"peer_zone", "zone-b"}, {"streams", "1"}}));
  // Not tried either: a burst to the pool's Pod (discovery gives it no burst port) would be an
  // error of the burst probe.
  for (const auto& family : registry.Collect()) {
    if (family.name != "podnet_probe_errors_total") continue;
    for (const auto& m : family.metric) {
      bool burst = std::any_of(m.label.begin(), m.label.end(), [](const auto& l) {
        return l.name == "probe" && l.value == "burst";
      });
      EXPECT_FALSE(burst && m.counter.value > 0) << "a burst probe error";
    }
  }
}

// The App's configuration for the probe Pods the fake API server lists, no probe on: this Pod
// podnet-s on node-s in zone-a, HTTP and UDP echo on `port`, and `responders` (YAML: more
// entries of the responders map, e.g. a burst responder).
std::string ProbePodsConfig(std::uint16_t port, const std::string& responders = "") {
  const std::string p = std::to_string(port);
  return "listen_address: \"127.0.0.1:" + p +
         "\"\nself: {name: podnet-s, node: node-s, zone: zone-a}\n"
         "responders: {udp_echo: {listen_address: \"127.0.0.1:" +
         p + "\"}" + (responders.empty() ? "" : ", " + responders) +
         "}\npeers:\n  kubernetes: {namespace: podnet, service: podnet, port: " + p + "}\n";
}

// The burst responder admits the probe Pods discovery lists (clients: probe_pods, the
// default), follows the list when a Pod leaves, and closes any other source as it connects.
// Sources: 127.0.0.1 is this Pod, 127.0.0.2 and .3 two discovered Pods of one node (a rollout
// with maxSurge: discovery probes one of them, both may be probers), 127.0.0.9 a stranger.
TEST(AppDiscoveryTest, TheBurstResponderAdmitsTheDiscoveredProbePodsOnly) {
  std::vector<json> endpoints = {EndpointJson("podnet-s", "127.0.0.1", "node-s", "zone-a"),
                                 EndpointJson("podnet-b", "127.0.0.2", "node-b", "zone-a"),
                                 EndpointJson("podnet-b2", "127.0.0.3", "node-b", "zone-a")};
  PodResponders free_port(1);  // a burst port free on 127.0.0.1, released for the App
  std::uint16_t burst_port = free_port.port;
  free_port.servers.clear();
  ASSERT_NE(burst_port, 0);
  DiscoveredApp d(
      ListJson("100", {SliceJson("podnet-abc12", "99", endpoints)}), [&](std::uint16_t port) {
        return ProbePodsConfig(
            port, "burst: {listen_address: \"127.0.0.1:" + std::to_string(burst_port) + "\"}");
      });
  ASSERT_TRUE(d.app);
  App* app = d.app.get();
  auto& registry = app->metrics().registry();
  // One control connection from `source` that sends a cookie: true when the responder asks for
  // the parameters (PARAM_EXCHANGE, 9), false when it closes the connection.
  auto admitted = [&](const std::string& source) {
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket s(io);
    s.open(boost::asio::ip::tcp::v4());
    s.bind({boost::asio::ip::make_address(source), 0});
    boost::system::error_code ec;
    s.connect({boost::asio::ip::make_address("127.0.0.1"), burst_port}, ec);
    if (ec) return false;
    std::string cookie(36, 'a');
    cookie.push_back('\0');
    boost::asio::write(s, boost::asio::buffer(cookie), ec);
    timeval tv{2, 0};
    setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char state = 0;
    std::size_t n = s.read_some(boost::asio::buffer(&state, 1), ec);
    return !ec && n == 1 && state == 9;
  };
  auto refused = [&] {
    return podnet::testing::CounterValue(registry, "podnet_responder_dropped_total",
                                         {{"responder", "burst"}, {"reason", "not_probe_pod"}});
  };
  Running running(*app);
  // Before discovery's first answer nobody is admitted; then the listed Pods are.
  EXPECT_TRUE(Eventually([&] { return admitted("127.0.0.2"); }, 5000ms));
  EXPECT_TRUE(admitted("127.0.0.1"));
  EXPECT_TRUE(admitted("127.0.0.3"));
  const double before = refused();
  EXPECT_FALSE(admitted("127.0.0.9"));
  EXPECT_EQ(refused(), before + 1);
  // podnet-b and podnet-b2 leave the Service: from now on their addresses are strangers'.
  std::shared_ptr<FakeStream> w = d.slices.Latest();
  ASSERT_TRUE(w);
  w->Push(EventJson("MODIFIED", SliceJson("podnet-abc12", "101", {endpoints[0]})));
  EXPECT_TRUE(Eventually([&] { return !admitted("127.0.0.2"); }, 3000ms));
  EXPECT_FALSE(admitted("127.0.0.3"));
  EXPECT_TRUE(admitted("127.0.0.1"));
  EXPECT_EQ(running.Join(), 0);
}

// Coverage from this node's side, in the whole App: the probe Pods discovery lists whose
// requests reached the responders are counted by their zone and path class
// (podnet_responder_probers); a stranger's are not. 127.0.0.1 is this Pod, .2 a Pod of its zone
// that sends /echo and UDP echo requests, .3 one of zone-b that sends nothing, .9 a stranger.
TEST(AppDiscoveryTest, TheRespondersCountTheProbePodsTheyHear) {
  std::vector<json> endpoints = {EndpointJson("podnet-s", "127.0.0.1", "node-s", "zone-a"),
                                 EndpointJson("podnet-a", "127.0.0.2", "node-a", "zone-a"),
                                 EndpointJson("podnet-b", "127.0.0.3", "node-b", "zone-b")};
  DiscoveredApp d(ListJson("100", {SliceJson("podnet-abc12", "99", endpoints)}),
                  [](std::uint16_t port) { return ProbePodsConfig(port); });
  ASSERT_TRUE(d.app);
  auto& registry = d.app->metrics().registry();
  // One /echo request from `source`; true when it was answered.
  auto echo = [&](const std::string& source) {
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket s(io);
    boost::system::error_code ec;
    s.open(boost::asio::ip::tcp::v4(), ec);
    s.bind({boost::asio::ip::make_address(source), 0}, ec);
    s.connect({boost::asio::ip::make_address("127.0.0.1"), d.port}, ec);
    if (ec) return false;
    const std::string req = "GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    boost::asio::write(s, boost::asio::buffer(req), ec);
    timeval tv{2, 0};
    setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::string got(64, '\0');
    std::size_t n = s.read_some(boost::asio::buffer(got), ec);
    return n > 12 && got.compare(0, 12, "HTTP/1.1 200") == 0;
  };
  auto probers = [&](const std::string& zone, const std::string& path_class) {
    auto m = podnet::testing::FindSeries(
        registry, "podnet_responder_probers",
        {{"peer_node", "node-s"}, {"source_zone", zone}, {"path_class", path_class}});
    return m ? m->gauge.value : -1;
  };
  Running running(*d.app);
  // Once discovery listed the Pods, the series are there, at 0.
  ASSERT_TRUE(Eventually([&] { return probers("zone-b", "cross_zone") == 0; }, 5000ms));
  EXPECT_EQ(probers("zone-a", "same_zone"), 0);
  EXPECT_EQ(probers("zone-a", "same_node"), 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(echo("127.0.0.2"));
    EXPECT_TRUE(echo("127.0.0.9"));
  }
  // Published at the next Reconcile (or within 15 s): a Pod joins zone-c.
  std::shared_ptr<FakeStream> w = d.slices.Latest();
  ASSERT_TRUE(w);
  endpoints.push_back(EndpointJson("podnet-c", "127.0.0.4", "node-c", "zone-c"));
  w->Push(EventJson("MODIFIED", SliceJson("podnet-abc12", "101", endpoints)));
  EXPECT_TRUE(Eventually([&] { return probers("zone-c", "cross_zone") == 0; }, 3000ms));
  EXPECT_EQ(probers("zone-a", "same_zone"), 1) << "podnet-a, three requests";
  EXPECT_EQ(probers("zone-b", "cross_zone"), 0);
  EXPECT_EQ(probers("zone-a", "same_node"), 0);
  double total = 0;
  for (const auto& family : registry.Collect()) {
    if (family.name != "podnet_responder_probers") continue;
    for (const auto& m : family.metric) total += m.gauge.value;
  }
  EXPECT_EQ(total, 1) << "the stranger is not counted";
  EXPECT_EQ(running.Join(), 0);
}

// Every responder counts what it serves: /echo, the HTTP latency target, as
// podnet_responder_requests_total{responder="http_echo",result="answered"}, one per request
// (GET and POST alike); other paths are not /echo requests.
TEST(AppTest, HttpEchoRequestsAreCounted) {
  TempDir dir;
  std::uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  std::string p = std::to_string(port);
  std::string config_path =
      dir.Write("podnet.yaml", "listen_address: \"127.0.0.1:" + p +
                                   "\"\nself: {name: s, node: node-a, zone: z}\n"
                                   "responders: {udp_echo: {listen_address: \"127.0.0.1:" +
                                   p + "\"}}\npeers: {static: []}\n");
  auto app = MakeApp(config_path, "");
  ASSERT_TRUE(app);
  Running running(*app);
  ASSERT_TRUE(Eventually([&] { return HttpGet(port, "/-/healthy") == "Healthy.\n"; }, 5000ms));
  auto answered = [&] {
    std::string m = HttpGet(port, "/metrics");
    const std::string series =
        R"(podnet_responder_requests_total{responder="http_echo",result="answered"} )";
    auto at = m.find(series);
    return at == std::string::npos ? -1.0 : std::stod(m.substr(at + series.size()));
  };
  EXPECT_EQ(answered(), 0);
  int status = 0;
  for (int i = 0; i < 5; ++i) {
    HttpGet(port, "/echo", &status);
    EXPECT_EQ(status, 200);
  }
  HttpGet(port, "/echo?x=1", &status, boost::beast::http::verb::post);
  EXPECT_EQ(status, 200);
  HttpGet(port, "/echoes", &status);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(answered(), 6);
  EXPECT_EQ(running.Join(), 0);
}

}  // namespace
}  // namespace podnet::app
