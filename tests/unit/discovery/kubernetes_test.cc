#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "exporter/discovery/kubernetes/api_client.h"
#include "exporter/discovery/kubernetes/api_config.h"
#include "exporter/discovery/kubernetes/discovery.h"
#include "exporter/discovery/kubernetes/discovery_impl.h"
#include "exporter/discovery/kubernetes/resources.h"
#include "exporter/discovery/kubernetes/service_info.h"
#include "tests/unit/discovery/fake_api_server.h"
#include "tests/unit/discovery/fixtures.h"
#include "tests/unit/testing/loop.h"
#include "tests/unit/testing/manual_clock.h"

namespace podnet::discovery::kubernetes {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using podnet::testing::CounterValue;
using podnet::testing::EndpointJson;
using podnet::testing::EventJson;
using podnet::testing::Eventually;
using podnet::testing::FakeApiServer;
using podnet::testing::FakeRequest;
using podnet::testing::FakeResponse;
using podnet::testing::FakeStream;
using podnet::testing::ListJson;
using podnet::testing::LoopThread;
using podnet::testing::ManualClock;
using podnet::testing::SliceJson;
using podnet::testing::TempDir;
using podnet::testing::VirtualTime;

// ---------------------------------------------------------------------------------------------
// Fixtures shaped as a real API server's responses (kubectl get --raw, v1.29; uids shortened).

constexpr char kNodeJson[] = R"({
  "kind": "Node", "apiVersion": "v1",
  "metadata": {
    "name": "node-a", "uid": "5e0c7a9e-8f1d-4c7e-9a56-3a0a1b2c3d4e", "resourceVersion": "88123",
    "creationTimestamp": "2026-11-01T08:00:00Z",
    "labels": {
      "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
      "failure-domain.beta.kubernetes.io/region": "ap-northeast-2",
      "failure-domain.beta.kubernetes.io/zone": "ap-northeast-2a",
      "kubernetes.io/hostname": "node-a", "node.kubernetes.io/instance-type": "m6i.large",
      "topology.kubernetes.io/region": "ap-northeast-2",
      "topology.kubernetes.io/zone": "ap-northeast-2a"
    },
    "annotations": {"node.alpha.kubernetes.io/ttl": "0"}
  },
  "spec": {"podCIDR": "10.0.1.0/24", "providerID": "aws:///ap-northeast-2a/i-0abc"},
  "status": {"addresses": [{"type": "InternalIP", "address": "192.168.1.10"}],
             "conditions": [{"type": "Ready", "status": "True"}]}
})";

std::string BookmarkJson(const std::string& rv) {
  return EventJson("BOOKMARK",
                   {{"metadata", {{"resourceVersion", rv}, {"creationTimestamp", nullptr}}}});
}

json GoneStatus() {
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", json::object()},
          {"status", "Failure"},
          {"message", "too old resource version: 4990 (5001)"},
          {"reason", "Expired"},
          {"code", 410}};
}

json SliceA(const std::string& rv = "4990") {
  return SliceJson("podnet-abc12", rv,
                   {EndpointJson("podnet-self", "10.0.1.10", "node-a", "ap-northeast-2a"),
                    EndpointJson("podnet-b", "10.0.2.10", "node-b", "ap-northeast-2a"),
                    EndpointJson("podnet-c", "10.0.3.10", "node-c", "ap-northeast-2b")});
}

// ---------------------------------------------------------------------------------------------
// Pure parts: kubeconfig, in-cluster configuration, resources.

TEST(KubeconfigTest, CurrentContextWithInlineDataAndToken) {
  std::string ca_b64 =
      "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==";  // "-----BEGIN CERTIFICATE-----\n"
  std::string text = R"(apiVersion: v1
kind: Config
current-context: lab
clusters:
- name: other
  cluster: {server: "https://10.9.9.9"}
- name: lab-cluster
  cluster:
    server: https://[fd00::1]:6443
    certificate-authority-data: )" +
                     ca_b64 + R"(
contexts:
- name: other
  context: {cluster: other, user: other}
- name: lab
  context: {cluster: lab-cluster, user: admin, namespace: podnet}
users:
- name: admin
  user: {token: "  abc.def  "}
- name: other
  user: {}
)";
  std::string err;
  auto c = ParseKubeconfig(text, "/tmp", "", &err);
  ASSERT_TRUE(c) << err;
  EXPECT_EQ(c->host, "fd00::1");
  EXPECT_EQ(c->port, 6443);
  EXPECT_EQ(c->ca_pem, "-----BEGIN CERTIFICATE-----\n");
  EXPECT_EQ(c->token, "abc.def");
  EXPECT_TRUE(c->token_file.empty());

  auto other = ParseKubeconfig(text, "/tmp", "other", &err);
  ASSERT_TRUE(other) << err;
  EXPECT_EQ(other->host, "10.9.9.9");
  EXPECT_EQ(other->port, 443);
}

TEST(KubeconfigTest, FilesRelativeToTheKubeconfig) {
  TempDir dir;
  dir.Write("ca.crt", "CA PEM");
  dir.Write("client.crt", "CERT PEM");
  dir.Write("client.key", "KEY PEM");
  std::string path = dir.Write("config", R"(
current-context: c
clusters: [{name: k, cluster: {server: "https://kube.example:8443/", certificate-authority: ca.crt}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users: [{name: u, user: {client-certificate: client.crt, client-key: client.key, tokenFile: tok}}]
)");
  std::string err;
  auto c = LoadKubeconfig(path, "", &err);
  ASSERT_TRUE(c) << err;
  EXPECT_EQ(c->host, "kube.example");
  EXPECT_EQ(c->port, 8443);
  EXPECT_EQ(c->ca_pem, "CA PEM");
  EXPECT_EQ(c->client_cert_pem, "CERT PEM");
  EXPECT_EQ(c->client_key_pem, "KEY PEM");
  EXPECT_EQ(c->token_file, dir.path() + "/tok");
}

TEST(KubeconfigTest, ProblemsAreErrorsNotExceptions) {
  struct Case {
    std::string text;
    std::string want;
  } cases[] = {
      {"current-context: c\nclusters: [{name: k, cluster: {server: \"https://a\"}}]\n"
       "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
       "users: [{name: u, user: {exec: {command: aws, apiVersion: "
       "client.authentication.k8s.io/v1beta1}}}]\n",
       "exec and auth-provider credential plugins are not supported"},
      {"current-context: nope\ncontexts: []\n", "context \"nope\" not found"},
      {"current-context: c\nclusters: [{name: k, cluster: {server: \"http://a\"}}]\n"
       "contexts: [{name: c, context: {cluster: k}}]\n",
       "only https://"},
      {"current-context: c\nclusters: [{name: k, cluster: {server: \"https://a:99999\"}}]\n"
       "contexts: [{name: c, context: {cluster: k}}]\n",
       "bad port"},
      {"current-context: c\nclusters: [{name: k, cluster: {server: \"https://a\", "
       "certificate-authority-data: \"!!\"}}]\ncontexts: [{name: c, context: {cluster: k}}]\n",
       "not valid base64"},
      {"{{{", "not valid YAML"},
      {"- a list", "not a kubeconfig"},
      {"", "not a kubeconfig"},
  };
  for (const auto& c : cases) {
    std::string err;
    EXPECT_FALSE(ParseKubeconfig(c.text, "/tmp", "", &err)) << c.text;
    EXPECT_NE(err.find(c.want), std::string::npos) << err;
  }
  std::string err;
  EXPECT_FALSE(LoadKubeconfig("/nonexistent/kubeconfig", "", &err));
  EXPECT_NE(err.find("No such file"), std::string::npos) << err;
  // A token or certificate "file" that is a device: refused at once (before: read until
  // bad_alloc).
  EXPECT_FALSE(ReadSmallFile("/dev/zero", &err));
  EXPECT_EQ(err, "/dev/zero: it is a character device (only regular files are read)");
}

TEST(InClusterConfigTest, ServiceAccountAndEnvironment) {
  TempDir sa;
  sa.Write("ca.crt", "CA");
  sa.Write("token", "tok\n");
  std::map<std::string, std::string> env{{"KUBERNETES_SERVICE_HOST", "fd00:10:96::1"},
                                         {"KUBERNETES_SERVICE_PORT", "443"}};
  auto lookup = [&](const std::string& k) -> std::optional<std::string> {
    auto it = env.find(k);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  std::string err;
  auto c = InClusterConfig(sa.path(), lookup, &err);
  ASSERT_TRUE(c) << err;
  EXPECT_EQ(c->host, "fd00:10:96::1");
  EXPECT_EQ(c->port, 443);
  EXPECT_EQ(c->ca_pem, "CA");
  EXPECT_EQ(c->token_file, sa.path() + "/token");

  env["KUBERNETES_SERVICE_PORT"] = "https";
  EXPECT_FALSE(InClusterConfig(sa.path(), lookup, &err));
  env.clear();
  EXPECT_FALSE(InClusterConfig(sa.path(), lookup, &err));
  EXPECT_NE(err.find("KUBERNETES_SERVICE_HOST"), std::string::npos);
}

TEST(ResourcesTest, NodeZoneLabels) {
  std::string err;
  EXPECT_EQ(NodeZone(json::parse(kNodeJson), &err), "ap-northeast-2a");
  json old = {{"metadata",
               {{"name", "n"}, {"labels", {{"failure-domain.beta.kubernetes.io/zone", "z1"}}}}}};
  EXPECT_EQ(NodeZone(old, &err), "z1");
  EXPECT_EQ(NodeZone(json{{"metadata", {{"name", "n"}}}}, &err), "");
  EXPECT_FALSE(NodeZone(json::array(), &err));
  EXPECT_FALSE(NodeZone(json{{"metadata", 3}}, &err));
}

TEST(ResourcesTest, ReadyEndpointsFollowTheApiSemantics) {
  json slice = SliceJson("s", "1",
                         {EndpointJson("ready", "10.0.0.1", "n1", "z1"),
                          EndpointJson("unknown-is-ready", "10.0.0.2", "n2", "z1", nullptr),
                          EndpointJson("not-ready", "10.0.0.3", "n3", "z1", false),
                          EndpointJson("terminating", "10.0.0.4", "n4", "z1", true, true),
                          {{"addresses", {"10.0.0.5"}}},  // no targetRef, no node, no zone
                          {{"addresses", {"not-an-ip"}}},
                          {{"addresses", json::array()}},
                          {{"addresses", {"fd00::9"}}}});  // wrong family for an IPv4 slice
  std::string err;
  auto eps = ReadyEndpoints(slice, &err);
  ASSERT_TRUE(eps) << err;
  ASSERT_EQ(eps->size(), 3u);
  EXPECT_EQ((*eps)[0].name, "ready");
  EXPECT_EQ((*eps)[0].address.to_string(), "10.0.0.1");
  EXPECT_EQ((*eps)[0].node, "n1");
  EXPECT_EQ((*eps)[0].zone, "z1");
  EXPECT_EQ((*eps)[1].name, "unknown-is-ready");
  EXPECT_EQ((*eps)[2].name, "10.0.0.5");
  EXPECT_EQ((*eps)[2].node, "");

  // A slice with no ready Pods omits `endpoints` (or has null); FQDN slices give nothing.
  EXPECT_TRUE(
      ReadyEndpoints(json{{"metadata", {{"name", "e"}}}, {"addressType", "IPv4"}}, &err)->empty());
  EXPECT_TRUE(
      ReadyEndpoints(SliceJson("f", "1", {{{"addresses", {"a.example"}}}}, "FQDN"), &err)->empty());
  EXPECT_FALSE(ReadyEndpoints(json{{"addressType", "IPv4"}}, &err));
  json bad = SliceA();
  bad["endpoints"] = "x";
  EXPECT_FALSE(ReadyEndpoints(bad, &err));
}

// Whether `s` has no C0 control character (NUL, ESC, CR, LF ...) or DEL.
bool NoControl(const std::string& s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) return false;
  }
  return true;
}

// Strings of an API answer are bounded and escaped where they are read (TextAt): Pod and node
// names at 253 bytes (DNS subdomains), zones at 63 (label values); NUL, ESC and invalid UTF-8
// shown as \xNN. A hostile or broken API server must not mint a 1 MB label value, a NUL in a
// label or a terminal escape sequence in a log line.
TEST(ResourcesTest, HostileStringsAreBoundedAndEscapedWhereTheyAreRead) {
  const std::string mb(1 << 20, 'p');
  json slice =
      SliceJson("s", "1",
                {EndpointJson(mb, "10.0.0.1", std::string("node\0evil", 9), "\x1b[31mzone\x1b[0m"),
                 EndpointJson("p2", "10.0.0.2", "n\xff\xfe", mb)});
  std::string err;
  auto eps = ReadyEndpoints(slice, &err);
  ASSERT_TRUE(eps) << err;
  ASSERT_EQ(eps->size(), 2u);
  for (const Endpoint& e : *eps) {
    EXPECT_LE(e.name.size(), 253u);
    EXPECT_LE(e.node.size(), 253u);
    EXPECT_LE(e.zone.size(), 63u);
    EXPECT_TRUE(NoControl(e.name) && NoControl(e.node) && NoControl(e.zone)) << e.node;
  }
  EXPECT_EQ((*eps)[0].name.substr(0, 10), "pppppppppp");
  EXPECT_EQ((*eps)[0].node, "node\\x00evil");
  EXPECT_EQ((*eps)[0].zone, "\\x1b[31mzone\\x1b[0m");
  EXPECT_EQ((*eps)[1].node, "n\\xff\\xfe");

  json node = json::parse(kNodeJson);
  node["metadata"]["labels"]["topology.kubernetes.io/zone"] = mb;
  auto zone = NodeZone(node, &err);
  ASSERT_TRUE(zone) << err;
  EXPECT_LE(zone->size(), 63u);
  node["metadata"]["labels"]["topology.kubernetes.io/zone"] = std::string("a\0b", 3);
  EXPECT_EQ(NodeZone(node, &err), "a\\x00b");

  // A Status message (logged, and shown on /-/ready) is bounded too.
  json status = GoneStatus();
  status["message"] = mb + "\x1b[2J";
  std::string message = StatusMessage(status.dump());
  EXPECT_LE(message.size(), 512u);
  EXPECT_TRUE(NoControl(message));
}

TEST(ResourcesTest, MergeDeduplicatesPodsAcrossSlices) {
  std::string err;
  std::map<std::string, std::vector<Endpoint>> slices;
  // Dual stack: the same Pods in an IPv6 slice; one Pod also in a second IPv4 slice (churn).
  slices["v6"] = ReadyEndpoints(SliceJson("v6", "1",
                                          {EndpointJson("p1", "fd00::1", "n1", "z1"),
                                           EndpointJson("p2", "fd00::2", "n2", "z2"),
                                           EndpointJson("p6", "fd00::6", "n6", "z2")},
                                          "IPv6"),
                                &err)
                     .value();
  slices["v4a"] = ReadyEndpoints(SliceJson("v4a", "1",
                                           {EndpointJson("p1", "10.0.0.1", "n1", "z1"),
                                            EndpointJson("p2", "10.0.0.2", "n2", "z2")}),
                                 &err)
                      .value();
  slices["v4b"] =
      ReadyEndpoints(SliceJson("v4b", "1", {EndpointJson("p2", "10.0.0.2", "n2", "z2")}), &err)
          .value();
  auto merged = MergeSlices(slices);
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0].name, "p1");
  EXPECT_EQ(merged[0].address.to_string(), "10.0.0.1");
  EXPECT_EQ(merged[1].name, "p2");
  EXPECT_EQ(merged[1].address.to_string(), "10.0.0.2");
  EXPECT_EQ(merged[2].name, "p6");  // IPv6 only
  EXPECT_EQ(merged[2].address.to_string(), "fd00::6");
}

TEST(BackoffTest, GrowsWithJitterAndHonoursRetryAfter) {
  Backoff b(100ms, 1000ms, 5000ms);
  std::vector<std::chrono::milliseconds> got;
  for (int i = 0; i < 8; ++i) got.push_back(b.Next());
  EXPECT_GE(got[0], 50ms);
  EXPECT_LE(got[0], 100ms);
  EXPECT_GE(got[3], 400ms);
  EXPECT_LE(got[3], 800ms);
  for (int i = 4; i < 8; ++i) {
    EXPECT_GE(got[i], 500ms);
    EXPECT_LE(got[i], 1000ms);
  }
  EXPECT_EQ(b.Next(3s), 3000ms);   // Retry-After wins over a shorter backoff
  EXPECT_EQ(b.Next(60s), 5000ms);  // but is capped
  b.Reset();
  EXPECT_LE(b.Next(), 100ms);
}

// ---------------------------------------------------------------------------------------------
// The client and discovery against the fake API server.

// What every discovery test keeps: the service account, the series, the snapshots published.
class DiscoveryFixture : public ::testing::Test {
 protected:
  DiscoveryFixture() : registry_(), metrics_(registry_) { sa_.Write("token", "token-1\n"); }

  ApiConfig Config(std::uint16_t port) {
    return podnet::testing::FakeApiConfig(port, sa_.path() + "/token");
  }

  DiscoveryOptions Options(bool want_zone) const {
    DiscoveryOptions o;
    o.namespace_name = "podnet";
    o.service = "podnet";
    o.node = "node-a";
    o.want_zone = want_zone;
    o.initial_backoff = 20ms;
    o.max_backoff = 200ms;
    o.min_watch_timeout = 5s;
    o.watch_grace = 1s;
    o.min_publish_interval = publish_interval_;
    return o;
  }

  // A client for the fake server at `port`, on `io`.
  std::unique_ptr<ApiClient> Client(boost::asio::io_context& io, std::uint16_t port,
                                    ClientOptions copts = {}) {
    copts.request_timeout =
        copts.request_timeout == ClientOptions{}.request_timeout ? 3000ms : copts.request_timeout;
    std::string err;
    auto client = ApiClient::Create(io, Config(port), copts, &err);
    EXPECT_TRUE(client) << err;
    return client;
  }

  std::function<void(const Snapshot&)> Recorder() {
    return [this](const Snapshot& s) {
      std::lock_guard lock(mu_);
      snapshots_.push_back(s);
    };
  }

  std::size_t Published() {
    std::lock_guard lock(mu_);
    return snapshots_.size();
  }
  Snapshot Last() {
    std::lock_guard lock(mu_);
    return snapshots_.empty() ? Snapshot{} : snapshots_.back();
  }
  std::vector<std::string> Names() {
    std::vector<std::string> n;
    for (const auto& e : Last().endpoints) n.push_back(e.name);
    return n;
  }
  double Errors(const std::string& resource, const std::string& reason) {
    return CounterValue(registry_, "podnet_kubernetes_api_errors_total",
                        {{"resource", resource}, {"reason", reason}});
  }
  double Events(const std::string& type) {
    return CounterValue(registry_, "podnet_kubernetes_watch_events_total",
                        {{"resource", "endpointslices"}, {"type", type}});
  }
  double Lists() {
    return CounterValue(registry_, "podnet_kubernetes_lists_total",
                        {{"resource", "endpointslices"}});
  }

  TempDir sa_;
  prometheus::Registry registry_;
  DiscoveryMetrics metrics_;
  std::mutex mu_;
  std::vector<Snapshot> snapshots_;
  std::chrono::milliseconds publish_interval_{1000};
};

// Discovery on a loop thread of its own and the real clock, as the exporter runs it.
class DiscoveryTest : public DiscoveryFixture {
 protected:
  ~DiscoveryTest() override {
    loop_.Run([&] { discovery_.reset(); });
    loop_.Stop();
  }

  void StartDiscovery(std::uint16_t port, bool want_zone = true, ClientOptions copts = {}) {
    loop_.Run([&] {
      discovery_ = std::make_unique<KubernetesDiscovery>(
          loop_.io(), Client(loop_.io(), port, copts), Options(want_zone), metrics_, Recorder());
      discovery_->Start();
    });
  }

  LoopThread loop_;
  std::unique_ptr<KubernetesDiscovery> discovery_;
};

// Discovery whose backoff and coalescing wait on a clock the test moves (ManualClock), its loop
// run on the test's thread; the API server's answers are still real I/O over loopback.
class VirtualDiscoveryTest : public DiscoveryFixture {
 protected:
  // The server's threads finish their TLS shutdowns with the client, so the loop runs (on
  // this thread) while another one stops the server.
  ~VirtualDiscoveryTest() override {
    discovery_.reset();
    std::atomic<bool> stopped{false};
    std::thread stopper([&] {
      server_.reset();
      stopped = true;
    });
    EXPECT_TRUE(time_.RunUntil([&] { return stopped.load(); }, 30000ms));
    stopper.join();
  }

  FakeApiServer& Serve(FakeApiServer::Handler handler) {
    server_ = std::make_unique<FakeApiServer>(std::move(handler));
    return *server_;
  }

  void StartDiscovery(std::uint16_t port, bool want_zone) {
    discovery_ = std::make_unique<BasicKubernetesDiscovery<ManualClock>>(
        io_, Client(io_, port), Options(want_zone), metrics_, Recorder());
    discovery_->Start();
  }

  boost::asio::io_context io_;
  VirtualTime time_{io_};
  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<BasicKubernetesDiscovery<ManualClock>> discovery_;
};

// Serves the Node, one list and watches whose streams the test feeds, in order.
struct Script {
  std::mutex mu;
  std::vector<std::shared_ptr<FakeStream>> watches;
  std::vector<std::string> lists;  // bodies for successive lists (the last one repeats)
  int list_calls = 0;

  FakeResponse operator()(const FakeRequest& r) {
    std::lock_guard lock(mu);
    if (r.target == "/api/v1/nodes/node-a") return {200, {}, kNodeJson};
    if (r.target.find("watch=1") != std::string::npos) {
      auto s = std::make_shared<FakeStream>();
      watches.push_back(s);
      return {200, {}, "", s};
    }
    if (r.target.find("/endpointslices?") != std::string::npos) {
      std::size_t i = std::min<std::size_t>(list_calls++, lists.size() - 1);
      return {200, {}, lists[i]};
    }
    return {404, {}, R"({"kind":"Status","apiVersion":"v1","status":"Failure","code":404})"};
  }
  std::shared_ptr<FakeStream> Watch(std::size_t i) {
    std::lock_guard lock(mu);
    return i < watches.size() ? watches[i] : nullptr;
  }
};

TEST_F(DiscoveryTest, ZoneListAndWatchEvents) {
  auto script = std::make_shared<Script>();
  script->lists = {ListJson("5000", {SliceA()})};
  FakeApiServer server([script](const FakeRequest& r) { return (*script)(r); });
  StartDiscovery(server.port());

  ASSERT_TRUE(Eventually([&] { return Last().synced && Last().self_zone == "ap-northeast-2a"; }));
  EXPECT_EQ(Names(), (std::vector<std::string>{"podnet-b", "podnet-c", "podnet-self"}));
  EXPECT_TRUE(loop_.Run([&] { return discovery_->synced(); }));
  ASSERT_TRUE(Eventually([&] { return script->Watch(0) != nullptr; }));
  auto reqs = server.requests();
  EXPECT_EQ(reqs[0].authorization, "Bearer token-1");
  std::string list_target =
      "/apis/discovery.k8s.io/v1/namespaces/podnet/endpointslices"
      "?labelSelector=kubernetes.io%2Fservice-name%3Dpodnet";
  EXPECT_EQ(server.count(list_target + "&watch=1&resourceVersion=5000&allowWatchBookmarks=true"
                                       "&timeoutSeconds="),
            1);
  // The first list is served from the API server's watch cache (resourceVersion=0), as
  // client-go's informers list.
  EXPECT_EQ(server.count(list_target + "&resourceVersion=0"), 1);

  auto w = script->Watch(0);
  // A new slice (a Pod in a third zone), sent in two pieces to cross a chunk boundary.
  std::string added = EventJson(
      "ADDED", SliceJson("podnet-xyz89", "5001",
                         {EndpointJson("podnet-d", "10.0.4.10", "node-d", "ap-northeast-2c")}));
  w->Push(added.substr(0, 40));
  w->Push(added.substr(40));
  ASSERT_TRUE(Eventually([&] { return Last().endpoints.size() == 4; }));
  // podnet-b goes not ready; podnet-c terminates.
  json a = SliceA("5002");
  a["endpoints"][1]["conditions"]["ready"] = false;
  a["endpoints"][2]["conditions"]["terminating"] = true;
  w->Push(EventJson("MODIFIED", a) + BookmarkJson("5003"));
  ASSERT_TRUE(Eventually([&] {
    return Names() == std::vector<std::string>{"podnet-d", "podnet-self"};
  }));
  w->Push(EventJson("DELETED", SliceJson("podnet-xyz89", "5004", {})));
  ASSERT_TRUE(Eventually([&] { return Names() == std::vector<std::string>{"podnet-self"}; }));
  w->Push(BookmarkJson("5100"));
  ASSERT_TRUE(Eventually([&] { return Events("BOOKMARK") == 2; }));
  EXPECT_EQ(Events("ADDED"), 1);
  EXPECT_EQ(Events("MODIFIED"), 1);
  EXPECT_EQ(Events("DELETED"), 1);
  auto g =
      podnet::testing::FindSeries(registry_, "podnet_discovery_candidates", {{"source", "watch"}});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->gauge.value, 1);

  // The server ends the watch (timeoutSeconds): renewed at once from the bookmark's version.
  w->End();
  ASSERT_TRUE(Eventually([&] { return script->Watch(1) != nullptr; }));
  EXPECT_EQ(server.count("&watch=1&resourceVersion=5100&"), 1);
  EXPECT_EQ(Lists(), 1);
  EXPECT_EQ(Errors("endpointslices", "connection_lost"), -1);
}

// Issue 42: anyone who may write EndpointSlices in the namespace can label one with the
// Service's name. Only the EndpointSlice controller's slices list probe Pods: a forged one, in
// the list or in a watch event, is ignored and counted, without a relist; a slice that loses
// the controller's label leaves. (A badly shaped one stays a bad_response: the API server
// validates every slice written, so that is the server's fault.) The Service's UID comes from
// the controller's owner reference (the bursts' key).
TEST_F(DiscoveryTest, SlicesTheControllerDidNotWriteAreIgnoredAndCounted) {
  auto forged = [](const std::string& name, const std::string& rv, const std::string& pod) {
    json s = SliceJson(name, rv, {EndpointJson(pod, "10.0.9.9", "node-x", "ap-northeast-2a")});
    s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] = "kubectl";
    s["metadata"]["ownerReferences"][0]["uid"] = "chosen-by-the-attacker";
    return s;
  };
  json unlabelled = forged("podnet-nolabel", "4999", "podnet-evil2");
  unlabelled["metadata"]["labels"].erase("endpointslice.kubernetes.io/managed-by");
  auto script = std::make_shared<Script>();
  script->lists = {
      ListJson("5000", {forged("podnet-evil", "4998", "podnet-evil1"), SliceA(), unlabelled})};
  FakeApiServer server([script](const FakeRequest& r) { return (*script)(r); });
  StartDiscovery(server.port(), false);
  ASSERT_TRUE(Eventually([&] { return Last().synced; }));
  EXPECT_EQ(Names(), (std::vector<std::string>{"podnet-b", "podnet-c", "podnet-self"}));
  EXPECT_EQ(Last().service_uid, "svc-uid");
  EXPECT_EQ(Errors("endpointslices", "unmanaged_slice"), 2);
  EXPECT_EQ(Errors("endpointslices", "bad_response"), -1);

  ASSERT_TRUE(Eventually([&] { return script->Watch(0) != nullptr; }));
  auto w = script->Watch(0);
  w->Push(EventJson("ADDED", forged("podnet-evil", "5001", "podnet-evil3")) +
          EventJson("MODIFIED", forged("podnet-evil", "5002", "podnet-evil4")));
  // The controller's slice moves on (a Pod in another zone) after them: when it shows, the
  // forged events before it have been read.
  json a = SliceA("5003");
  a["endpoints"].push_back(EndpointJson("podnet-d", "10.0.4.10", "node-d", "ap-northeast-2c"));
  w->Push(EventJson("MODIFIED", a));
  ASSERT_TRUE(Eventually([&] { return Last().endpoints.size() == 4; }));
  EXPECT_EQ(Names(), (std::vector<std::string>{"podnet-b", "podnet-c", "podnet-d", "podnet-self"}));
  EXPECT_EQ(Errors("endpointslices", "unmanaged_slice"), 4);
  EXPECT_EQ(Lists(), 1) << "a forged event made the Pod relist";
  // The controller's slice relabelled by someone else: its Pods leave.
  json taken = SliceA("5004");
  taken["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] = "kubectl";
  w->Push(EventJson("MODIFIED", taken));
  ASSERT_TRUE(Eventually([&] { return Last().endpoints.empty(); }));
  EXPECT_EQ(Last().service_uid, "");
}

TEST_F(VirtualDiscoveryTest, ABurstOfEventsIsPublishedTogether) {
  // A rollout: 30 MODIFIED events at once. Publishing each would rebuild and re-select every
  // candidate 30 times; with the interval, the changes within it go out together at its end,
  // and the first change after a quiet interval goes out at once.
  publish_interval_ = 300ms;
  auto script = std::make_shared<Script>();
  script->lists = {ListJson("5000", {SliceA()})};
  auto& server = Serve([script](const FakeRequest& r) { return (*script)(r); });
  StartDiscovery(server.port(), /*want_zone=*/false);
  ASSERT_TRUE(time_.RunUntil([&] { return script->Watch(0) != nullptr; }));
  ASSERT_EQ(Published(), 1u);  // the list, at once
  std::string burst;
  for (int i = 0; i < 30; ++i) {
    json a = SliceA(std::to_string(5001 + i));
    a["endpoints"][1]["conditions"]["ready"] = i % 2 == 0;  // podnet-b flaps; ends not ready
    burst += EventJson("MODIFIED", a);
  }
  script->Watch(0)->Push(burst);
  ASSERT_TRUE(time_.RunUntil([&] { return Events("MODIFIED") == 30; }));
  // The clock has not moved since the list was published: all 30 wait for its interval's end.
  EXPECT_EQ(Published(), 1u);
  EXPECT_EQ(time_.UntilNextDue(), 300ms);
  time_.Advance(299ms);
  EXPECT_EQ(Published(), 1u);
  time_.Advance(1ms);
  ASSERT_EQ(Published(), 2u);
  EXPECT_EQ(Names(), (std::vector<std::string>{"podnet-c", "podnet-self"}));
  time_.Advance(10s);  // nothing else comes after it
  EXPECT_EQ(Published(), 2u);
  // Quiet for longer than the interval: the next change is published as soon as it is read.
  script->Watch(0)->Push(EventJson("MODIFIED", SliceA("5100")));
  ASSERT_TRUE(time_.RunUntil([&] { return Events("MODIFIED") == 31; }));
  EXPECT_EQ(Published(), 3u);
  EXPECT_EQ(Names(), (std::vector<std::string>{"podnet-b", "podnet-c", "podnet-self"}));
}

TEST_F(DiscoveryTest, GoneRelistsBothAsEventAndAsStatus) {
  auto script = std::make_shared<Script>();
  script->lists = {
      ListJson("5000", {SliceA()}),
      ListJson("6000",
               {SliceJson("podnet-abc12", "5990",
                          {EndpointJson("podnet-e", "10.0.5.10", "node-e", "ap-northeast-2a")})}),
      ListJson("7000", {SliceA("6990")})};
  std::atomic<bool> watch_gone{false};
  FakeApiServer server([&, script](const FakeRequest& r) {
    if (watch_gone && r.target.find("resourceVersion=6000") != std::string::npos) {
      watch_gone = false;
      return FakeResponse{410, {}, GoneStatus().dump()};
    }
    return (*script)(r);
  });
  StartDiscovery(server.port(), /*want_zone=*/false);
  ASSERT_TRUE(Eventually([&] { return script->Watch(0) != nullptr; }));
  // An ERROR event with code 410: the version is too old; list again.
  watch_gone = true;  // and the watch after that relist gets 410 as its HTTP status
  script->Watch(0)->Push(EventJson("ERROR", GoneStatus()));
  ASSERT_TRUE(Eventually([&] { return Lists() == 3; }, 3000ms));
  ASSERT_TRUE(Eventually([&] { return script->Watch(1) != nullptr; }));
  EXPECT_EQ(Events("ERROR"), 1);
  EXPECT_EQ(Errors("endpointslices", "gone"), 2);
  EXPECT_EQ(server.count("resourceVersion=7000"), 1);
  EXPECT_EQ(Names(), (std::vector<std::string>{"podnet-b", "podnet-c", "podnet-self"}));
  EXPECT_EQ(Last().self_zone, "");  // not asked for
  EXPECT_EQ(server.count("/nodes/"), 0);
}

// Relists ask for a state no older than the last resourceVersion seen (the watch cache serves
// it); a list answered that its version is gone (410) or too new for this server (504,
// ResourceVersionTooLarge) is followed by lists without a version (quorum reads) until one
// succeeds, a failed one included; the next relist is from the cache again (client-go's
// reflector, relistResourceVersion).
TEST_F(DiscoveryTest, RelistsComeFromTheWatchCacheUnlessTheVersionIsGone) {
  auto script = std::make_shared<Script>();
  script->lists = {ListJson("5000", {SliceA()}), ListJson("6000", {SliceA("5990")})};
  const std::string too_large =
      R"({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Timeout","code":504,)"
      R"("details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large )"
      R"(resource version"}]}})";
  std::atomic<int> list_calls{0};
  FakeApiServer server([&, script](const FakeRequest& r) {
    bool list = r.target.find("watch=1") == std::string::npos &&
                r.target.find("/endpointslices?") != std::string::npos;
    if (list) {
      switch (list_calls++) {
        case 1:
          return FakeResponse{410, {}, GoneStatus().dump()};  // at 5000
        case 2:
          return FakeResponse{500, {}, R"({"kind":"Status","code":500})"};
        case 4:
          return FakeResponse{504, {}, too_large};  // at 6000
        default:
          break;
      }
    }
    return (*script)(r);
  });
  StartDiscovery(server.port(), /*want_zone=*/false);
  ASSERT_TRUE(Eventually([&] { return script->Watch(0) != nullptr; }));
  script->Watch(0)->Push(EventJson("ERROR", GoneStatus()));
  ASSERT_TRUE(Eventually([&] { return script->Watch(1) != nullptr; }, 5000ms));
  script->Watch(1)->Push(EventJson("ERROR", GoneStatus()));
  ASSERT_TRUE(Eventually([&] { return script->Watch(2) != nullptr; }, 5000ms));
  std::vector<std::string> lists;
  for (const auto& r : server.requests()) {
    if (r.target.find("watch=1") == std::string::npos) lists.push_back(r.target);
  }
  const std::string path = EndpointSlicesPath("podnet", "podnet");
  EXPECT_EQ(lists,
            (std::vector<std::string>{path + "&resourceVersion=0", path + "&resourceVersion=5000",
                                      path, path, path + "&resourceVersion=6000", path}));
}

TEST_F(VirtualDiscoveryTest, ServerErrorsAndThrottlingBackOff) {
  // Lists fail twice with 500, then once with 429 and Retry-After: 1, then succeed. The clock
  // moves only when the test moves it, so each retry's wait is read exactly: the first timer's
  // due time after each failure, and the clock at the server when the retry arrived.
  auto script = std::make_shared<Script>();
  script->lists = {ListJson("5000", {SliceA()})};
  // The handler outlives the test's body (the fixture stops the server): what it shares with
  // the test is held by both.
  struct Lists {
    std::atomic<int> calls{0};
    std::mutex mu;
    std::vector<ManualClock::time_point> at;  // of each list request, by the clock of the test
  };
  auto lists = std::make_shared<Lists>();
  auto& server = Serve([lists, script](const FakeRequest& r) {
    if (r.target.find("watch=1") == std::string::npos &&
        r.target.find("/endpointslices") != std::string::npos) {
      {
        std::lock_guard lock(lists->mu);
        lists->at.push_back(ManualClock::now());
      }
      int n = lists->calls++;
      if (n < 2) {
        return FakeResponse{500,
                            {},
                            R"({"kind":"Status","apiVersion":"v1","status":"Failure",)"
                            R"("message":"etcdserver: request timed out","code":500})"};
      }
      if (n == 2) {
        return FakeResponse{429,
                            {{"Retry-After", "1"}},
                            R"({"kind":"Status","apiVersion":"v1","status":"Failure",)"
                            R"("reason":"TooManyRequests","code":429})"};
      }
    }
    return (*script)(r);
  });
  StartDiscovery(server.port(), /*want_zone=*/false);
  // Failure 1: initial backoff 20 ms, jittered down to half at most.
  ASSERT_TRUE(time_.RunUntil([&] { return Errors("endpointslices", "server_error") == 1; }));
  auto first = time_.UntilNextDue();
  EXPECT_GE(first, 10ms);
  EXPECT_LE(first, 20ms);
  ASSERT_TRUE(time_.AdvanceToNextDue());
  // Failure 2: doubled, [20, 40] ms.
  ASSERT_TRUE(time_.RunUntil([&] { return Errors("endpointslices", "server_error") == 2; }));
  auto second = time_.UntilNextDue();
  EXPECT_GE(second, 20ms);
  EXPECT_LE(second, 40ms);
  ASSERT_TRUE(time_.AdvanceToNextDue());
  // 429: Retry-After (1 s) wins over the backoff (at most 80 ms by now).
  ASSERT_TRUE(time_.RunUntil([&] { return Errors("endpointslices", "throttled") == 1; }));
  EXPECT_EQ(time_.UntilNextDue(), 1000ms);
  time_.Advance(999ms);
  EXPECT_EQ(lists->calls.load(), 3);
  time_.Advance(1ms);
  ASSERT_TRUE(time_.RunUntil([&] { return Last().synced; }));
  EXPECT_EQ(Errors("endpointslices", "server_error"), 2);
  EXPECT_EQ(Errors("endpointslices", "throttled"), 1);
  std::lock_guard lock(lists->mu);
  const auto& at = lists->at;
  ASSERT_EQ(at.size(), 4u);
  EXPECT_EQ(at[1] - at[0], first);
  EXPECT_EQ(at[2] - at[1], second);
  EXPECT_EQ(at[3] - at[2], 1000ms);
}

TEST_F(VirtualDiscoveryTest, TheNodeIsRetriedLikewise) {
  auto script = std::make_shared<Script>();
  script->lists = {ListJson("5000", {SliceA()})};
  auto node_calls = std::make_shared<std::atomic<int>>(0);
  auto& server = Serve([node_calls, script](const FakeRequest& r) {
    if (r.target == "/api/v1/nodes/node-a" && (*node_calls)++ == 0) {
      return FakeResponse{503, {}, "{}"};
    }
    return (*script)(r);
  });
  StartDiscovery(server.port(), /*want_zone=*/true);
  ASSERT_TRUE(time_.RunUntil([&] { return Errors("node", "server_error") == 1 && Last().synced; }));
  EXPECT_EQ(Last().self_zone, "");
  auto wait = time_.UntilNextDue();
  EXPECT_GE(wait, 10ms);
  EXPECT_LE(wait, 20ms);
  ASSERT_TRUE(time_.AdvanceToNextDue());
  ASSERT_TRUE(time_.RunUntil([&] { return Last().self_zone == "ap-northeast-2a"; }));
  EXPECT_EQ(node_calls->load(), 2);
  EXPECT_EQ(time_.UntilNextDue(), ManualClock::duration::max());  // nothing more to retry
}

TEST_F(DiscoveryTest, TokenRotationAndADroppedWatch) {
  auto script = std::make_shared<Script>();
  script->lists = {ListJson("5000", {SliceA()})};
  std::mutex mu;
  std::string accepted = "Bearer token-1";
  FakeApiServer server([&, script](const FakeRequest& r) {
    {
      std::lock_guard lock(mu);
      if (r.authorization != accepted) {
        return FakeResponse{401,
                            {},
                            R"({"kind":"Status","apiVersion":"v1","metadata":{},)"
                            R"("status":"Failure","message":"Unauthorized",)"
                            R"("reason":"Unauthorized","code":401})"};
      }
    }
    return (*script)(r);
  });
  StartDiscovery(server.port(), false);
  ASSERT_TRUE(Eventually([&] { return script->Watch(0) != nullptr; }));
  // The kubelet rotates the projected token; the old one stops working.
  sa_.Write("token", "token-2\n");
  {
    std::lock_guard lock(mu);
    accepted = "Bearer token-2";
  }
  script->Watch(0)->Drop();  // the connection breaks mid-watch
  ASSERT_TRUE(Eventually([&] { return script->Watch(1) != nullptr; }, 3000ms));
  EXPECT_EQ(Errors("endpointslices", "connection_lost"), 1);
  EXPECT_EQ(Errors("endpointslices", "unauthorized"), 1);  // once: then the file is re-read
  auto reqs = server.requests();
  EXPECT_EQ(reqs.back().authorization, "Bearer token-2");
  EXPECT_NE(reqs.back().target.find("resourceVersion=5000"), std::string::npos);
  EXPECT_EQ(Lists(), 1);  // a broken watch resumes from its version: no relist
}

TEST_F(DiscoveryTest, HostileResponsesAreCountedNotFatal) {
  std::atomic<int> n{0};
  auto script = std::make_shared<Script>();
  script->lists = {ListJson("5000", {SliceA()})};
  FakeApiServer server([&, script](const FakeRequest& r) {
    bool list = r.target.find("watch=1") == std::string::npos &&
                r.target.find("/endpointslices") != std::string::npos;
    if (list) {
      switch (n++) {
        case 0:
          return FakeResponse{200, {}, std::string(300 * 1024, '[')};  // over the limit
        case 1:
          return FakeResponse{200, {}, "{\"items\": [1, 2, "};  // truncated JSON
        case 2:
          return FakeResponse{200, {}, R"({"metadata":{"resourceVersion":"1"},"items":[3]})"};
        case 3:
          return FakeResponse{200,     {},    "HTTP/1.1 200 OK\r\nbad header\r\n\r\n",
                              nullptr, false, true};
        case 4:
          return FakeResponse{200, {}, "", nullptr, /*hang=*/true};
        case 5:
          return FakeResponse{200, {}, R"({"kind":"EndpointSliceList","items":[]})"};
        default:
          break;
      }
    }
    return (*script)(r);
  });
  ClientOptions copts;
  copts.max_body_bytes = 256 * 1024;
  copts.max_event_bytes = 64 * 1024;
  copts.request_timeout = 300ms;
  StartDiscovery(server.port(), false, copts);
  ASSERT_TRUE(Eventually([&] { return script->Watch(0) != nullptr; }, 5000ms));
  EXPECT_EQ(Errors("endpointslices", "too_large"), 1);
  EXPECT_EQ(Errors("endpointslices", "bad_response"), 4);  // 1, 2, 3 and 5 (no version)
  EXPECT_EQ(Errors("endpointslices", "timeout"), 1);
  // Watch: garbage in the stream relists; an event without end exceeds the event limit.
  script->Watch(0)->Push("{\"type\": \"ADDED\", \"object\": nul\n");
  ASSERT_TRUE(Eventually([&] { return script->Watch(1) != nullptr; }));
  EXPECT_EQ(Errors("endpointslices", "bad_response"), 5);
  EXPECT_EQ(Lists(), 2);
  script->Watch(1)->Push(std::string(80 * 1024, 'x'));
  ASSERT_TRUE(Eventually([&] { return script->Watch(2) != nullptr; }));
  EXPECT_EQ(Errors("endpointslices", "too_large"), 2);
  script->Watch(2)->Push(EventJson(
      "ADDED", {{"metadata", {{"name", "x"}}}, {"addressType", "IPv4"}, {"endpoints", 7}}));
  ASSERT_TRUE(Eventually([&] { return script->Watch(3) != nullptr; }));
  EXPECT_EQ(Errors("endpointslices", "bad_response"), 6);
  EXPECT_EQ(Names(), (std::vector<std::string>{"podnet-b", "podnet-c", "podnet-self"}));
}

// A list whose endpoints carry 1 MB names, NUL and ESC: the peers discovery publishes have
// bounded, escaped names (they become the peer, peer_node and peer_zone labels), counted.
TEST_F(DiscoveryTest, HostileNamesAreBoundedEscapedAndCounted) {
  auto script = std::make_shared<Script>();
  const std::string mb(1 << 20, 'n');
  script->lists = {ListJson(
      "5000", {SliceJson("podnet-abc12", "5000",
                         {EndpointJson(mb, "10.0.2.10", std::string("node\0b", 6), mb),
                          EndpointJson("podnet-c", "10.0.3.10", "node-c", "zone\x1b[2J")})})};
  FakeApiServer server([script](const FakeRequest& r) { return (*script)(r); });
  StartDiscovery(server.port(), false);
  ASSERT_TRUE(Eventually([&] { return Last().synced; }));
  auto eps = Last().endpoints;
  ASSERT_EQ(eps.size(), 2u);
  for (const Endpoint& e : eps) {
    EXPECT_LE(e.name.size(), 253u);
    EXPECT_LE(e.node.size(), 253u);
    EXPECT_LE(e.zone.size(), 63u);
    EXPECT_TRUE(NoControl(e.name) && NoControl(e.node) && NoControl(e.zone)) << e.zone;
  }
  EXPECT_EQ(eps[1].zone, "zone\\x1b[2J");
  EXPECT_EQ(CounterValue(registry_, "podnet_kubernetes_strings_sanitized_total",
                         {{"resource", "endpointslices"}, {"reason", "truncated"}}),
            2);  // the name and the zone of the first endpoint
  EXPECT_EQ(CounterValue(registry_, "podnet_kubernetes_strings_sanitized_total",
                         {{"resource", "endpointslices"}, {"reason", "escaped"}}),
            2);  // its node, the second endpoint's zone
}

// Bodies whose fields hold another JSON type than the API's (issue: `{"kind": 123}` in a 401
// body ended the process through nlohmann's type_error). Every one must read as absent.
const std::vector<std::string> kWrongTypeBodies = {
    R"({"kind":123,"message":"x"})",
    R"({"kind":null,"message":null})",
    R"({"kind":[],"message":[]})",
    R"({"kind":{},"message":{}})",
    R"({"kind":true,"message":true,"code":"410"})",
    R"({"kind":"Status","message":7,"code":1e400})",
    R"({"kind":"Node","metadata":{"name":5,"labels":{"topology.kubernetes.io/zone":9}}})",
    R"({"kind":"Node","metadata":{"labels":[]}})",
    R"({"metadata":{"resourceVersion":5},"items":{}})",
    R"({"metadata":[],"items":[{"metadata":{"name":"s"},"addressType":4,"endpoints":[]}]})",
    "null",
    "[]",
    "{}",
    "true",
    "123",
    "\"Status\"",
};

TEST(ResourcesTest, FieldsOfAnotherTypeReadAsAbsent) {
  json j = {{"s", "v"},  {"i", 7},       {"u", 18446744073709551615ull}, {"f", 1.5},
            {"b", true}, {"n", nullptr}, {"a", json::array()},           {"o", json::object()}};
  EXPECT_EQ(StringAt(j, "s"), "v");
  EXPECT_EQ(IntegerAt(j, "i"), 7);
  EXPECT_EQ(BoolAt(j, "b"), true);
  EXPECT_NE(ObjectAt(j, "o"), nullptr);
  EXPECT_NE(ArrayAt(j, "a"), nullptr);
  for (const char* key : {"i", "u", "f", "b", "n", "a", "o", "missing"}) {
    EXPECT_EQ(StringAt(j, key), "") << key;
  }
  for (const char* key : {"s", "u", "f", "b", "n", "a", "o", "missing"}) {
    EXPECT_EQ(IntegerAt(j, key), std::nullopt) << key;  // u: beyond long long
  }
  for (const char* key : {"s", "i", "n", "a", "o"}) EXPECT_EQ(BoolAt(j, key), std::nullopt) << key;
  for (const char* key : {"s", "i", "n", "a"}) EXPECT_EQ(ObjectAt(j, key), nullptr) << key;
  for (const char* key : {"s", "i", "n", "o"}) EXPECT_EQ(ArrayAt(j, key), nullptr) << key;
  for (const json& not_object : {json(nullptr), json::array({1}), json(true), json(3), json("s")}) {
    EXPECT_EQ(FieldAt(not_object, "s"), nullptr) << not_object.dump();
    EXPECT_EQ(StringAt(not_object, "s"), "") << not_object.dump();
  }
  EXPECT_EQ(StatusMessage(R"({"kind":"Status","message":"forbidden"})"), "forbidden");
  std::string err;
  for (const auto& body : kWrongTypeBodies) {
    EXPECT_EQ(StatusMessage(body), "") << body;
    json v = json::parse(body, nullptr, false);
    EXPECT_NO_THROW(NodeZone(v, &err)) << body;
    EXPECT_NO_THROW(ReadyEndpoints(v, &err)) << body;
    EXPECT_NO_THROW(ObjectName(v)) << body;
  }
}

TEST_F(DiscoveryTest, AnyJsonTypeInAnyApiFieldIsABadResponseNotACrash) {
  // Every error status the discovery meets, and the Node GET (200) while self.zone is empty,
  // answered with each wrong-typed body in turn; then the real answers. The process must keep
  // going, count each, and end up synced with the Node's zone.
  const std::vector<int> statuses = {401, 403, 404, 410, 429, 500, 503};
  // A body with a metadata object but no zone label is a Node without one, which ends the Node
  // GETs (no_zone_label is not retried): the Node gets the others.
  std::vector<std::string> node_bodies;
  for (const auto& b : kWrongTypeBodies) {
    if (b.find(R"("metadata":{)") == std::string::npos) node_bodies.push_back(b);
  }
  auto script = std::make_shared<Script>();
  script->lists = {ListJson("5000", {SliceA()})};
  std::atomic<std::size_t> list_calls{0}, node_calls{0};
  const std::size_t n = std::max(statuses.size(), kWrongTypeBodies.size());
  FakeApiServer server([&, script](const FakeRequest& r) {
    bool list = r.target.find("watch=1") == std::string::npos &&
                r.target.find("/endpointslices") != std::string::npos;
    if (list) {
      std::size_t i = list_calls++;
      if (i < n) {  // error statuses
        return FakeResponse{
            statuses[i % statuses.size()], {}, kWrongTypeBodies[i % kWrongTypeBodies.size()]};
      }
      if (i < n + kWrongTypeBodies.size()) return FakeResponse{200, {}, kWrongTypeBodies[i - n]};
    }
    if (r.target == "/api/v1/nodes/node-a") {
      std::size_t i = node_calls++;
      if (i < node_bodies.size()) return FakeResponse{200, {}, node_bodies[i]};
    }
    return (*script)(r);
  });
  StartDiscovery(server.port(), /*want_zone=*/true);
  ASSERT_TRUE(
      Eventually([&] { return Last().synced && Last().self_zone == "ap-northeast-2a"; }, 20000ms));
  const std::size_t failed_lists = n + kWrongTypeBodies.size();
  EXPECT_EQ(list_calls.load(), failed_lists + 1);
  double failures = 0;
  for (const char* reason : {"unauthorized", "forbidden", "not_found", "gone", "throttled",
                             "server_error", "bad_response"}) {
    failures += std::max(0.0, Errors("endpointslices", reason));
  }
  EXPECT_EQ(failures, static_cast<double>(failed_lists));
  EXPECT_EQ(Errors("endpointslices", "bad_response"), static_cast<double>(kWrongTypeBodies.size()));
  EXPECT_EQ(Errors("node", "bad_response"), static_cast<double>(node_bodies.size()));
  // Watch events whose fields have other types: the stream ends and the list starts over.
  ASSERT_TRUE(Eventually([&] { return script->Watch(0) != nullptr; }));
  script->Watch(0)->Push(R"({"type":"ERROR","object":{"kind":"Status","code":"410","message":5}})"
                         "\n");
  ASSERT_TRUE(Eventually([&] { return script->Watch(1) != nullptr; }));
  script->Watch(1)->Push(R"({"type":7,"object":{"metadata":{"name":[]}}})"
                         "\n");
  ASSERT_TRUE(Eventually([&] { return script->Watch(2) != nullptr; }));
  script->Watch(2)->Push(
      R"({"type":"ADDED","object":{"metadata":{"name":"s","resourceVersion":9},)"
      R"("addressType":"IPv4","endpoints":[{"addresses":[1],"conditions":{"ready":"yes"},)"
      R"("targetRef":{"name":{}},"nodeName":[],"zone":null}]}})"
      "\n");
  ASSERT_TRUE(Eventually([&] { return Events("ADDED") == 1; }));
  EXPECT_EQ(Errors("endpointslices", "unmanaged_slice"), 1);  // no labels: not the controller's
  EXPECT_EQ(Errors("endpointslices", "watch_error"), 1);      // code "410" is not the number 410
  EXPECT_EQ(Names(), (std::vector<std::string>{"podnet-b", "podnet-c", "podnet-self"}));
}

TEST_F(DiscoveryTest, AFailureWithoutAnHttpAnswerSaysWhatFailedAndNoStatus) {
  std::uint16_t port = 0;
  {  // a port nothing listens on
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }
  StartDiscovery(port);
  std::string err;
  ASSERT_TRUE(Eventually(
      [&] {
        err = loop_.Run([&] { return discovery_->last_error(); });
        return !err.empty();
      },
      3000ms));
  EXPECT_TRUE(err == "GET node node-a: connect: Connection refused" ||
              err == "endpointslices list: connect: Connection refused")
      << err;
}

TEST(ApiClientTest, UntrustedCertificateIsATlsError) {
  FakeApiServer server([](const FakeRequest&) { return FakeResponse{200, {}, "{}"}; });
  LoopThread loop;
  ApiConfig c;
  c.host = "127.0.0.1";
  c.port = server.port();
  c.ca_pem = podnet::testing::MakeCert("another-ca").cert_pem;
  std::promise<ApiResponse> got;
  std::unique_ptr<ApiClient> client;
  std::shared_ptr<ApiClient::Call> call;
  loop.Run([&] {
    std::string err;
    client = ApiClient::Create(loop.io(), c, {}, &err);
    ASSERT_TRUE(client) << err;
    call = client->Get("/api/v1/nodes/x", [&](ApiResponse r) { got.set_value(r); });
  });
  auto r = got.get_future().get();
  EXPECT_EQ(r.error, ApiError::kTls);
  EXPECT_EQ(server.requests().size(), 0u);

  // Trusted, and the insecure switch also skips the check: both reach the server.
  for (bool insecure : {false, true}) {
    c.ca_pem = insecure ? "" : podnet::testing::ServerCert().cert_pem;
    c.insecure_skip_tls_verify = insecure;
    c.token = "static";
    std::promise<ApiResponse> ok;
    loop.Run([&] {
      std::string err;
      client = ApiClient::Create(loop.io(), c, {}, &err);
      call = client->Get("/api/v1/nodes/x", [&](ApiResponse r) { ok.set_value(r); });
    });
    auto r2 = ok.get_future().get();
    EXPECT_EQ(r2.error, ApiError::kNone) << r2.detail;
    EXPECT_EQ(r2.status, 200);
    EXPECT_EQ(r2.body, "{}");
  }
  EXPECT_EQ(server.requests().back().authorization, "Bearer static");
  loop.Run([&] {
    call.reset();
    client.reset();
  });
}

TEST(ApiClientTest, BadCredentialsAndBadPem) {
  LoopThread loop;
  ApiConfig c;
  c.host = "127.0.0.1";
  c.port = 1;
  c.ca_pem = "not a pem";
  std::string err;
  EXPECT_FALSE(loop.Run([&] { return ApiClient::Create(loop.io(), c, {}, &err) != nullptr; }));
  EXPECT_NE(err.find("certificate authority"), std::string::npos) << err;
  c.ca_pem.clear();
  c.token_file = "/nonexistent/token";
  std::promise<ApiResponse> got;
  std::unique_ptr<ApiClient> client;
  loop.Run([&] {
    client = ApiClient::Create(loop.io(), c, {}, &err);
    client->Get("/x", [&](ApiResponse r) { got.set_value(r); });
  });
  EXPECT_EQ(got.get_future().get().error, ApiError::kCredentials);
  loop.Run([&] { client.reset(); });
}

// ---------------------------------------------------------------------------------------------
// What a probed Service asks for (ServiceInfoPoller).

// A Service as `kubectl get --raw /api/v1/namespaces/shop/services/api` shows it (v1.31).
json ServiceJson(const std::string& traffic_distribution, json internal_policy = "Cluster") {
  json spec = {{"clusterIP", "10.96.12.34"},
               {"clusterIPs", {"10.96.12.34"}},
               {"ipFamilies", {"IPv4"}},
               {"ports", {{{"name", "echo"}, {"port", 9479}, {"protocol", "UDP"}}}},
               {"selector", {{"app", "api"}}},
               {"sessionAffinity", "None"},
               {"type", "ClusterIP"},
               {"internalTrafficPolicy", internal_policy}};
  if (!traffic_distribution.empty()) spec["trafficDistribution"] = traffic_distribution;
  return {{"kind", "Service"},
          {"apiVersion", "v1"},
          {"metadata",
           {{"name", "api"}, {"namespace", "shop"}, {"uid", "svc-1"}, {"resourceVersion", "77"}}},
          {"spec", spec},
          {"status", {{"loadBalancer", json::object()}}}};
}

// An endpoint with hints.forZones, as the EndpointSlice controller writes them.
json HintedEndpoint(const std::string& pod, const std::string& ip, const std::string& zone) {
  json e = EndpointJson(pod, ip, "node-" + zone, zone);
  e["hints"] = {{"forZones", {{{"name", zone}}}}};
  return e;
}

TEST(ServiceInfoTest, ReadsWhatTheServiceAsksFor) {
  std::string err;
  auto loc = ReadServiceLocality(ServiceJson("PreferClose"), &err);
  ASSERT_TRUE(loc) << err;
  EXPECT_EQ(loc->traffic_distribution, "PreferClose");
  EXPECT_EQ(loc->internal_traffic_policy, "Cluster");
  EXPECT_FALSE(loc->zone_hints);

  loc = ReadServiceLocality(ServiceJson("", json()), &err);  // unset fields, null policy
  ASSERT_TRUE(loc) << err;
  EXPECT_EQ(loc->traffic_distribution, "");
  EXPECT_EQ(loc->internal_traffic_policy, "");

  json odd = ServiceJson("PreferClose");
  odd["spec"]["trafficDistribution"] = 3;  // another JSON type reads as absent
  loc = ReadServiceLocality(odd, &err);
  ASSERT_TRUE(loc) << err;
  EXPECT_EQ(loc->traffic_distribution, "");

  EXPECT_FALSE(ReadServiceLocality(json::array(), &err));
  EXPECT_FALSE(ReadServiceLocality(json{{"spec", json::object()}}, &err));
  json bad_spec = ServiceJson("");
  bad_spec["spec"] = "x";
  EXPECT_FALSE(ReadServiceLocality(bad_spec, &err));
  EXPECT_NE(err.find("spec"), std::string::npos) << err;
}

// The attack of issue 21: a 1 MB spec.trafficDistribution became a 1 MB label value (and log
// line), a NUL stayed in a label.
TEST(ServiceInfoTest, HostileFieldsAreBoundedAndEscaped) {
  json service = ServiceJson(std::string(1 << 20, 'P'), std::string("Clu\0ster", 8));
  std::string err;
  auto loc = ReadServiceLocality(service, &err);
  ASSERT_TRUE(loc) << err;
  EXPECT_LE(loc->traffic_distribution.size(), 63u);
  EXPECT_EQ(loc->traffic_distribution.substr(0, 4), "PPPP");
  EXPECT_EQ(loc->internal_traffic_policy, "Clu\\x00ster");
}

TEST(ServiceInfoTest, ZoneHintsAreAnyNonEmptyForZones) {
  json plain = json::parse(
      ListJson("1", {SliceJson("s1", "1", {EndpointJson("p1", "10.0.0.1", "n1", "a")})}));
  EXPECT_FALSE(SlicesHaveZoneHints(plain));
  json hinted =
      json::parse(ListJson("1", {SliceJson("s1", "1", {EndpointJson("p1", "10.0.0.1", "n1", "a")}),
                                 SliceJson("s2", "1", {HintedEndpoint("p2", "10.0.0.2", "b")})}));
  EXPECT_TRUE(SlicesHaveZoneHints(hinted));
  json empty_hint = plain;
  empty_hint["items"][0]["endpoints"][0]["hints"] = {{"forZones", json::array()}};
  EXPECT_FALSE(SlicesHaveZoneHints(empty_hint));
  for (json broken : {json(), json::array(), json{{"items", 1}}, json{{"items", {1, "x"}}},
                      json{{"items", {{{"endpoints", {{{"hints", "x"}}}}}}}}}) {
    EXPECT_FALSE(SlicesHaveZoneHints(broken)) << broken.dump();
  }
}

// The poller on a loop thread of its own against the fake API server.
class ServiceInfoPollerTest : public DiscoveryFixture {
 protected:
  ~ServiceInfoPollerTest() override {
    loop_.Run([&] { poller_.reset(); });
    loop_.Stop();
  }
  void Start(std::uint16_t port, std::vector<ServiceRef> refs,
             std::function<bool()> on_duty = nullptr, std::chrono::milliseconds interval = 20ms) {
    loop_.Run([&] {
      poller_ =
          std::make_unique<ServiceInfoPoller>(loop_.io(), Client(loop_.io(), port), std::move(refs),
                                              interval, registry_, metrics_, std::move(on_duty));
      poller_->Start();
    });
  }
  // The labels of the one podnet_service_info series of `service`, "" when there is none.
  std::string Info(const std::string& service) {
    auto m = podnet::testing::FindSeries(registry_, "podnet_service_info", {{"service", service}});
    if (!m) return "";
    EXPECT_EQ(m->gauge.value, 1);
    return podnet::testing::LabelsText(m->label);
  }
  LoopThread loop_;
  std::unique_ptr<ServiceInfoPoller> poller_;
};

TEST_F(ServiceInfoPollerTest, ExportsWhatIsAskedAndFollowsChanges) {
  std::mutex mu;
  std::string service_body = ServiceJson("PreferClose").dump();
  int service_status = 200;
  std::string slices_body =
      ListJson("9", {SliceJson("api-x", "9", {HintedEndpoint("p1", "10.0.0.1", "a")})});
  FakeApiServer server([&](const FakeRequest& r) {
    std::lock_guard lock(mu);
    if (r.target == "/api/v1/namespaces/shop/services/api") {
      return FakeResponse{service_status, {}, service_body};
    }
    if (r.target == EndpointSlicesPath("shop", "api")) return FakeResponse{200, {}, slices_body};
    return FakeResponse{404, {}, R"({"kind":"Status","code":404})"};
  });
  Start(server.port(), {{"api-udp", "shop", "api"}, {"other", "shop", "missing"}});
  const std::string asked =
      R"({internal_traffic_policy="Cluster", service="api-udp", service_name="api", )"
      R"(service_namespace="shop", traffic_distribution="PreferClose", zone_hints="true"})";
  ASSERT_TRUE(Eventually([&] { return Info("api-udp") == asked; })) << Info("api-udp");
  // A Service that does not exist has no series, and counts not_found.
  EXPECT_EQ(Info("other"), "");
  EXPECT_TRUE(Eventually([&] { return Errors("services", "not_found") >= 1; }));

  // The hints go away (the controller withdrew them): the series follows, one at a time.
  {
    std::lock_guard lock(mu);
    slices_body =
        ListJson("10", {SliceJson("api-x", "10", {EndpointJson("p1", "10.0.0.1", "node-a", "a")})});
  }
  ASSERT_TRUE(Eventually([&] {
    return Info("api-udp").find(R"(zone_hints="false")") != std::string::npos;
  })) << Info("api-udp");

  // A hostile answer is a bad_response and keeps what was known.
  {
    std::lock_guard lock(mu);
    service_body = R"({"metadata": {"name": "api"}, "spec": [1, 2]})";
  }
  double before = Errors("services", "bad_response");
  ASSERT_TRUE(Eventually([&] { return Errors("services", "bad_response") > before; }));
  EXPECT_NE(Info("api-udp"), "");

  // The Service is deleted: its series goes.
  {
    std::lock_guard lock(mu);
    service_status = 404;
    service_body = R"({"kind":"Status","code":404})";
  }
  ASSERT_TRUE(Eventually([&] { return Info("api-udp").empty(); }));

  // A hostile Service: a 1 MB trafficDistribution and a NUL. Labels at most 63 bytes, the NUL
  // shown as \x00, both counted.
  {
    std::lock_guard lock(mu);
    service_status = 200;
    service_body = ServiceJson(std::string(1 << 20, 'P'), std::string("Clu\0ster", 8)).dump();
  }
  ASSERT_TRUE(Eventually([&] {
    return Info("api-udp").find(R"(internal_traffic_policy="Clu\x00ster")") != std::string::npos;
  })) << Info("api-udp").substr(0, 300);
  auto m = podnet::testing::FindSeries(registry_, "podnet_service_info", {{"service", "api-udp"}});
  ASSERT_TRUE(m);
  for (const auto& l : m->label) {
    EXPECT_LE(l.value.size(), 63u) << l.name;
    EXPECT_EQ(l.value.find('\0'), std::string::npos) << l.name;
  }
  EXPECT_GE(CounterValue(registry_, "podnet_kubernetes_strings_sanitized_total",
                         {{"resource", "services"}, {"reason", "truncated"}}),
            1);
  EXPECT_GE(CounterValue(registry_, "podnet_kubernetes_strings_sanitized_total",
                         {{"resource", "services"}, {"reason", "escaped"}}),
            1);

  // Destroying the poller removes the family.
  loop_.Run([&] { poller_.reset(); });
  for (const auto& f : registry_.Collect()) EXPECT_NE(f.name, "podnet_service_info");
}

// Off duty (another Pod of the zone polls), a Pod asks the API nothing and exports no series;
// back on duty, it asks again.
TEST_F(ServiceInfoPollerTest, OffDutyAsksNothingAndExportsNothing) {
  std::atomic<int> requests{0};
  std::atomic<bool> duty{true};
  FakeApiServer server([&](const FakeRequest& r) {
    ++requests;
    if (r.target == "/api/v1/namespaces/shop/services/api") {
      return FakeResponse{200, {}, ServiceJson("PreferClose").dump()};
    }
    return FakeResponse{200, {}, ListJson("9", {})};
  });
  Start(server.port(), {{"api-udp", "shop", "api"}}, [&] { return duty.load(); });
  ASSERT_TRUE(Eventually([&] { return !Info("api-udp").empty(); }));

  duty = false;
  ASSERT_TRUE(Eventually([&] { return Info("api-udp").empty(); }));
  int off = requests.load();
  std::this_thread::sleep_for(200ms);  // 10 poll intervals
  EXPECT_LE(requests.load(), off + 2) << "at most the requests in flight when it went off duty";
  EXPECT_EQ(Info("api-udp"), "");

  duty = true;
  EXPECT_TRUE(Eventually([&] { return !Info("api-udp").empty(); }));
  EXPECT_GT(requests.load(), off);
}

// A Pod that comes on duty between two polls (its peers' watch has just synced) polls at once
// when asked, not an interval later.
TEST_F(ServiceInfoPollerTest, PollNowDoesNotWaitForTheInterval) {
  std::atomic<bool> duty{false};
  FakeApiServer server([&](const FakeRequest& r) {
    if (r.target == "/api/v1/namespaces/shop/services/api") {
      return FakeResponse{200, {}, ServiceJson("PreferClose").dump()};
    }
    return FakeResponse{200, {}, ListJson("9", {})};
  });
  Start(
      server.port(), {{"api-udp", "shop", "api"}}, [&] { return duty.load(); }, 1h);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(Info("api-udp"), "");  // off duty at the first poll; the next is an hour away
  duty = true;
  loop_.Run([&] { poller_->PollNow(); });
  EXPECT_TRUE(Eventually([&] { return !Info("api-udp").empty(); }));
}

}  // namespace
}  // namespace podnet::discovery::kubernetes
