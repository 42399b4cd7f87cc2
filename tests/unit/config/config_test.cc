#include "exporter/config/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tests/unit/testing/ci.h"
#include "tests/unit/testing/peers.h"

namespace podnet::config {
namespace {

using namespace std::chrono_literals;
using boost::asio::ip::make_address;
using config::kinds::rtt::RttOptions;
using config::kinds::rtt::RttProtocol;

using Vars = std::map<std::string, std::string>;

EnvLookup FakeEnv(Vars vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string Dump(const std::vector<Error>& errors) {
  std::string out;
  for (const auto& e : errors) out += "  " + e.ToString() + "\n";
  return out.empty() ? "  (no errors)\n" : out;
}

// The lines every file below starts with (lines 1-3), so that error locations in the tables
// can be counted from a known place.
const std::string kSelf =
    "self:\n"
    "  name: pod-a\n"
    "  node: node-a\n";

// --------------------------------------------------------------------------------------------
// Valid files.

StaticPeer MakePeer(std::string name, const char* address, std::uint16_t port,
                    std::uint16_t burst_port, std::string node, std::string zone) {
  return podnet::testing::MakeStaticPeer(std::move(name), address, std::move(node), std::move(zone),
                                         port, burst_port);
}

RttOptions MakeRtt(RttProtocol protocol, Duration interval, int count, Duration spacing,
                   Duration timeout, int size) {
  RttOptions o;
  o.protocol = protocol;
  o.interval = interval;
  o.count = count;
  o.spacing = spacing;
  o.timeout = timeout;
  o.size = size;
  return o;
}

struct Expected {
  net::HostPort listen{make_address("0.0.0.0"), 9479};
  topology::Self self;
  net::HostPort udp_echo{make_address("0.0.0.0"), 9479};
  std::vector<StaticPeer> peers;
  std::optional<RttOptions> rtt;
};

struct ValidCase {
  std::string name;
  std::string text;
  Vars env;
  Expected want;
};

void PrintTo(const ValidCase& c, std::ostream* os) { *os << c.name; }

Expected Want(topology::Self self) {
  Expected e;
  e.self = std::move(self);
  return e;
}

std::vector<ValidCase> ValidCases() {
  std::vector<ValidCase> cases;

  cases.push_back({"minimal", kSelf, {}, Want({"pod-a", "node-a", ""})});

  {
    Expected e = Want({"pod-a", "node-a", "zone-a"});
    e.listen = {make_address("127.0.0.1"), 9100};
    e.udp_echo = {make_address("::"), 9101};
    e.peers = {MakePeer("srv-same", "10.0.2.72", 9200, 5300, "node-a", "zone-a"),
               MakePeer("srv-far", "10.0.3.9", 9479, 5201, "node-c", "zone-b"),
               // Same address as srv-far on another port: a second responder, not a duplicate.
               MakePeer("srv-far-2", "10.0.3.9", 9480, 5201, "node-c", "zone-b")};
    e.rtt = MakeRtt(RttProtocol::kUdp, 15s, 10, 100ms, 2s, 64);
    cases.push_back({"full",
                     "listen_address: \"127.0.0.1:9100\"\n"
                     "self:\n"
                     "  name: pod-a\n"
                     "  node: node-a\n"
                     "  zone: zone-a\n"
                     "responders:\n"
                     "  udp_echo:\n"
                     "    listen_address: \"[::]:9101\"\n"
                     "peers:\n"
                     "  static:\n"
                     "    - name: srv-same\n"
                     "      address: 10.0.2.72\n"
                     "      port: 9200\n"
                     "      burst_port: 5300\n"
                     "      node: node-a\n"
                     "      zone: zone-a\n"
                     "    - name: srv-far\n"
                     "      address: 10.0.3.9\n"
                     "      node: node-c\n"
                     "      zone: zone-b\n"
                     "    - name: srv-far-2\n"
                     "      address: 10.0.3.9\n"
                     "      port: 9480\n"
                     "      node: node-c\n"
                     "      zone: zone-b\n"
                     "probes:\n"
                     "  rtt:\n"
                     "    protocol: udp\n"
                     "    interval: 15s\n"
                     "    count: 10\n"
                     "    spacing: 100ms\n"
                     "    timeout: 2s\n"
                     "    size: 64\n",
                     {},
                     e});
  }

  {
    Expected e = Want({"pod-$1", "fallback-node", "zone-real"});
    e.listen = {make_address("0.0.0.0"), 9555};
    e.peers = {MakePeer("srv", "10.1.2.3", 9479, 5201, "node-b", "")};
    e.rtt = MakeRtt(RttProtocol::kIcmp, 20s, 20, 50ms, 1s, 56);
    cases.push_back({"env_expansion",
                     "listen_address: \":${PORT}\"\n"
                     "self:\n"
                     "  name: pod-$$${POD_INDEX}\n"
                     "  node: ${NODE_NAME:-fallback-node}\n"
                     "  zone: ${POD_ZONE:-zone-default}\n"
                     "peers:\n"
                     "  static:\n"
                     "    - name: srv\n"
                     "      address: ${PEER_IP}\n"
                     "      node: node-b\n"
                     "      zone: ${UNSET_ZONE}\n"
                     "probes:\n"
                     "  rtt:\n"
                     "    interval: ${RTT_INTERVAL}\n",
                     {{"PORT", "9555"},
                      {"POD_INDEX", "1"},
                      {"POD_ZONE", "zone-real"},
                      {"PEER_IP", "10.1.2.3"},
                      {"RTT_INTERVAL", "20s"}},
                     e});
  }

  {
    Expected e = Want({"pod-a", "node-a", ""});
    e.peers = {MakePeer("v6-full", "fd00::1", 9479, 5201, "", ""),
               MakePeer("v6-loopback", "::1", 9000, 5201, "node-a", "")};
    cases.push_back({"ipv6_peer",
                     kSelf +
                         "peers:\n"
                         "  static:\n"
                         "    - {name: v6-full, address: \"fd00::1\"}\n"
                         "    - {name: v6-loopback, address: \"::1\", port: 9000, node: node-a}\n",
                     {},
                     e});
  }

  {
    Expected e = Want({"pod-a", "node-a", "zone-a"});
    e.udp_echo = {make_address("0.0.0.0"), 9479};
    e.peers = {MakePeer("srv-same", "10.0.2.72", 9479, 5201, "node-a", "zone-a")};
    e.rtt = MakeRtt(RttProtocol::kIcmp, 10s, 20, 50ms, 1s, 56);
    cases.push_back({"flow_style_maps",
                     "self: { name: pod-a, node: node-a, zone: zone-a }\n"
                     "responders:\n"
                     "  udp_echo: { listen_address: \"0.0.0.0:9479\" }\n"
                     "peers:\n"
                     "  static:\n"
                     "    - { name: srv-same, address: 10.0.2.72, node: node-a, zone: zone-a }\n"
                     "probes:\n"
                     "  rtt:   { protocol: icmp, interval: 10s, count: 20, spacing: 50ms, "
                     "timeout: 1s }\n",
                     {},
                     e});
  }

  {
    Expected e = Want({"probe-7", "node-7", ""});
    e.peers = {MakePeer("srv", "10.9.8.7", 9479, 5201, "", "")};
    cases.push_back({"env_in_flow_maps_quoted",
                     "self: {name: \"${POD_NAME}\", node: \"${NODE_NAME}\"}\n"
                     "peers:\n"
                     "  static:\n"
                     "    - {name: srv, address: \"${PEER_IP}\"}\n",
                     {{"POD_NAME", "probe-7"}, {"NODE_NAME", "node-7"}, {"PEER_IP", "10.9.8.7"}},
                     e});
  }

  {
    // An empty rtt section turns the probe on with its defaults.
    Expected e = Want({"pod-a", "node-a", ""});
    e.rtt = RttOptions{};
    cases.push_back({"empty_rtt_section_uses_defaults", kSelf + "probes:\n  rtt:\n", {}, e});
  }

  {
    // A train that exactly fills the interval is allowed: 4*250ms + 1s = 2s.
    Expected e = Want({"pod-a", "node-a", ""});
    e.rtt = MakeRtt(RttProtocol::kIcmp, 2s, 5, 250ms, 1s, 56);
    cases.push_back(
        {"train_exactly_interval",
         kSelf + "probes:\n  rtt: {interval: 2s, count: 5, spacing: 250ms, timeout: 1s}\n",
         {},
         e});
  }
  return cases;
}

class ValidConfigTest : public ::testing::TestWithParam<ValidCase> {};

TEST_P(ValidConfigTest, Parses) {
  const ValidCase& c = GetParam();
  LoadResult r = Parse(c.text, "test.yaml", FakeEnv(c.env));
  ASSERT_TRUE(r.ok()) << "errors:\n" << Dump(r.errors);
  EXPECT_TRUE(r.errors.empty());
  const Config& got = *r.config;
  const Expected& want = c.want;
  EXPECT_EQ(got.file, "test.yaml");
  EXPECT_EQ(got.listen_address.address, want.listen.address);
  EXPECT_EQ(got.listen_address.port, want.listen.port);
  EXPECT_EQ(got.self, want.self);
  EXPECT_EQ(got.udp_echo_listen_address.address, want.udp_echo.address);
  EXPECT_EQ(got.udp_echo_listen_address.port, want.udp_echo.port);
  ASSERT_EQ(got.static_peers.size(), want.peers.size());
  for (std::size_t i = 0; i < want.peers.size(); ++i) {
    SCOPED_TRACE("peer " + std::to_string(i));
    EXPECT_EQ(got.static_peers[i].name, want.peers[i].name);
    EXPECT_EQ(got.static_peers[i].address, want.peers[i].address);
    EXPECT_EQ(got.static_peers[i].port, want.peers[i].port);
    EXPECT_EQ(got.static_peers[i].burst_port, want.peers[i].burst_port);
    EXPECT_EQ(got.static_peers[i].node, want.peers[i].node);
    EXPECT_EQ(got.static_peers[i].zone, want.peers[i].zone);
  }
  ASSERT_EQ(got.rtt.has_value(), want.rtt.has_value());
  if (want.rtt) {
    EXPECT_EQ(got.rtt->protocol, want.rtt->protocol);
    EXPECT_EQ(got.rtt->interval, want.rtt->interval);
    EXPECT_EQ(got.rtt->count, want.rtt->count);
    EXPECT_EQ(got.rtt->spacing, want.rtt->spacing);
    EXPECT_EQ(got.rtt->timeout, want.rtt->timeout);
    EXPECT_EQ(got.rtt->size, want.rtt->size);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, ValidConfigTest, ::testing::ValuesIn(ValidCases()),
                         [](const auto& info) { return info.param.name; });

// --------------------------------------------------------------------------------------------
// Invalid files: each must be rejected with an error that names the place, the key path and
// the problem. `prefix` is "test.yaml:LINE:COL: key.path: " (what ToString starts with);
// `message` must occur in the rest.

struct InvalidCase {
  std::string name;
  std::string text;
  std::string prefix;
  std::string message;
};

void PrintTo(const InvalidCase& c, std::ostream* os) { *os << c.name; }

std::vector<InvalidCase> InvalidCases() {
  const std::string rtt = kSelf + "probes:\n  rtt:\n";      // options on line 6, column 5
  const std::string peers = kSelf + "peers:\n  static:\n";  // first peer on line 6
  return {
      // Syntax.
      {"malformed_yaml_unclosed_flow_list", kSelf + "peers:\n  static: [\n",
       "test.yaml:", "malformed YAML"},
      {"malformed_yaml_bad_indentation", "self:\n  name: pod-a\n node: node-a\n",
       "test.yaml:3:", "malformed YAML"},
      {"top_level_list", "- self\n- peers\n",
       "test.yaml:1:1: ", "the configuration must be a mapping at the top level"},
      // Wrong types.
      {"list_where_map_wanted", "self:\n  - pod-a\n", "test.yaml:2:3: self: ", "must be a mapping"},
      {"probes_is_a_list", kSelf + "probes:\n  - rtt\n",
       "test.yaml:5:3: probes: ", "must be a mapping"},
      {"map_where_string_wanted", "self:\n  name: {first: pod-a}\n  node: node-a\n",
       "test.yaml:2:9: self.name: ", "must be a string"},
      {"static_peers_is_a_map", peers + "    name: srv\n",
       "test.yaml:6:5: peers.static: ", "must be a list of peers"},
      // Durations.
      {"zero_interval", rtt + "    interval: 0s\n",
       "test.yaml:6:15: probes.rtt.interval: ", "must be a positive duration, got \"0s\""},
      {"zero_spacing_bare_0", rtt + "    spacing: 0\n",
       "test.yaml:6:14: probes.rtt.spacing: ", "must be a positive duration, got \"0\""},
      {"negative_timeout", rtt + "    timeout: -1s\n",
       "test.yaml:6:14: probes.rtt.timeout: ", "invalid duration \"-1s\""},
      {"fractional_duration", rtt + "    interval: 1.5s\n",
       "test.yaml:6:15: probes.rtt.interval: ", "invalid duration \"1.5s\""},
      {"units_out_of_order", rtt + "    interval: 1s1m\n",
       "test.yaml:6:15: probes.rtt.interval: ", "invalid duration \"1s1m\""},
      {"duration_without_unit", rtt + "    timeout: 10\n",
       "test.yaml:6:14: probes.rtt.timeout: ", "invalid duration \"10\""},
      // Sizes and integers.
      {"size_too_small", rtt + "    size: 8\n",
       "test.yaml:6:11: probes.rtt.size: ", "must be from 16 to 9000, got 8"},
      {"size_too_big", rtt + "    size: 9001\n",
       "test.yaml:6:11: probes.rtt.size: ", "must be from 16 to 9000, got 9001"},
      {"size_with_unit", rtt + "    size: 1kB\n",
       "test.yaml:6:11: probes.rtt.size: ", "must be an integer, got \"1kB\""},
      {"count_zero", rtt + "    count: 0\n",
       "test.yaml:6:12: probes.rtt.count: ", "must be from 1 to 10000, got 0"},
      {"count_too_big", rtt + "    count: 10001\n",
       "test.yaml:6:12: probes.rtt.count: ", "must be from 1 to 10000, got 10001"},
      {"count_fraction", rtt + "    count: 2.5\n",
       "test.yaml:6:12: probes.rtt.count: ", "must be an integer, got \"2.5\""},
      {"protocol_unknown", rtt + "    protocol: tcp\n",
       "test.yaml:6:15: probes.rtt.protocol: ", "must be \"icmp\" or \"udp\", got \"tcp\""},
      {"train_longer_than_interval",
       rtt + "    interval: 1s\n    count: 20\n    spacing: 50ms\n    timeout: 1s\n",
       "test.yaml:6:5: probes.rtt: ",
       "a train lasts (count-1)*spacing + timeout = 1s950ms, longer than interval 1s"},
      // 999 * 1y does not fit in 64-bit nanoseconds: must not wrap round to a short train.
      {"train_overflows", rtt + "    interval: 1s\n    count: 1000\n    spacing: 1y\n",
       "test.yaml:6:5: probes.rtt: ", "a train lasts"},
      // Keys.
      {"unknown_top_level_key", kSelf + "scrape_interval: 10s\n",
       "test.yaml:4:1: scrape_interval: ",
       "unknown key (known keys: listen_address, self, responders, peers, probes, metrics)"},
      {"unknown_nested_key", rtt + "    jitter: 1ms\n", "test.yaml:6:5: probes.rtt.jitter: ",
       "unknown key (known keys: protocol, interval, count, spacing, timeout, size)"},
      {"unknown_key_in_self", kSelf + "  zon: zone-a\n",
       "test.yaml:4:3: self.zon: ", "unknown key"},
      {"unknown_key_in_peer", peers + "    - {name: a, address: 10.0.0.1, zones: z}\n",
       "test.yaml:6:36: peers.static[0].zones: ", "unknown key"},
      {"duplicate_key", kSelf + "  node: node-b\n", "test.yaml:4:3: self.node: ", "duplicate key"},
      {"duplicate_nested_key", rtt + "    count: 5\n    count: 6\n",
       "test.yaml:7:5: probes.rtt.count: ", "duplicate key"},
      // Peers.
      {"duplicate_peer_name",
       peers + "    - {name: srv, address: 10.0.0.1}\n    - {name: srv, address: 10.0.0.2}\n",
       "test.yaml:7:14: peers.static[1].name: ",
       "duplicate peer name \"srv\" (also peers.static[0])"},
      {"duplicate_address_and_port",
       peers + "    - {name: a, address: 10.0.0.1}\n    - {name: b, address: 10.0.0.1}\n",
       "test.yaml:7:26: peers.static[1].address: ", "same address and port as peers.static[0]"},
      {"duplicate_ipv6_written_differently",
       peers + "    - {name: a, address: \"fd00::1\"}\n"
               "    - {name: b, address: \"fd00:0:0:0::1\", port: 9479}\n",
       "test.yaml:7:26: peers.static[1].address: ", "same address and port as peers.static[0]"},
      {"bad_ip_address", peers + "    - {name: a, address: 10.0.0.256}\n",
       "test.yaml:6:26: peers.static[0].address: ",
       "must be an IPv4 or IPv6 address, got \"10.0.0.256\""},
      {"hostname_as_address", peers + "    - {name: a, address: srv.example.com}\n",
       "test.yaml:6:26: peers.static[0].address: ",
       "must be an IPv4 or IPv6 address, got \"srv.example.com\""},
      {"peer_without_address", peers + "    - {name: a}\n",
       "test.yaml:6:7: peers.static[0].address: ", "required"},
      {"port_zero", peers + "    - {name: a, address: 10.0.0.1, port: 0}\n",
       "test.yaml:6:42: peers.static[0].port: ", "must be from 1 to 65535, got 0"},
      {"port_too_big", peers + "    - {name: a, address: 10.0.0.1, port: 65536}\n",
       "test.yaml:6:42: peers.static[0].port: ", "must be from 1 to 65535, got 65536"},
      // Self.
      {"missing_self", "probes:\n  rtt: {}\n", "test.yaml:1:1: self: ", "required"},
      {"empty_file", "", "test.yaml", "self: required"},
      {"missing_self_node", "self:\n  name: pod-a\n",
       "test.yaml:2:3: self.node: ", "required and must not be empty"},
      {"empty_self_name", "self:\n  name: \"\"\n  node: node-a\n",
       "test.yaml:2:9: self.name: ", "required and must not be empty"},
      {"self_name_from_unset_variable", "self:\n  name: ${POD_NAME}\n  node: node-a\n",
       "test.yaml:2:9: self.name: ", "required and must not be empty"},
      // probes.dns.
      {"dns_names_required", kSelf + "probes:\n  dns: {interval: 30s}\n",
       "test.yaml:5:8: probes.dns.names: ", "required: a non-empty list of names"},
      {"dns_names_empty", kSelf + "probes:\n  dns: {names: []}\n",
       "test.yaml:5:16: probes.dns.names: ", "required: a non-empty list of names"},
      {"dns_bad_resolver", kSelf + "probes:\n  dns: {names: [a.b], resolvers: [bionic]}\n",
       "test.yaml:5:35: probes.dns.resolvers[0]: ",
       "must be \"glibc\" or \"musl\", got \"bionic\""},
      {"dns_duplicate_resolver",
       kSelf + "probes:\n  dns: {names: [a.b], resolvers: [musl, musl]}\n",
       "test.yaml:5:41: probes.dns.resolvers[1]: ", "duplicate resolver \"musl\""},
      {"dns_bad_name", kSelf + "probes:\n  dns: {names: [\"a..b\"]}\n",
       "test.yaml:5:17: probes.dns.names[0]: ", "not a valid DNS name: \"a..b\""},
      {"dns_duplicate_name", kSelf + "probes:\n  dns: {names: [a.b, a.b]}\n",
       "test.yaml:5:22: probes.dns.names[1]: ", "duplicate name \"a.b\""},
      {"dns_zero_interval", kSelf + "probes:\n  dns: {names: [a.b], interval: 0s}\n",
       "test.yaml:5:33: probes.dns.interval: ", "must be a positive duration"},
      {"dns_unknown_key", kSelf + "probes:\n  dns: {names: [a.b], ndots: 5}\n",
       "test.yaml:5:23: probes.dns.ndots: ", "unknown key"},
      // probes.dns.cluster_dns (the Kubernetes peers section is line 5, the dns one line 7).
      {"cluster_dns_without_kubernetes",
       kSelf + "probes:\n  dns: {names: [a.b], cluster_dns: {service: coredns}}\n",
       "test.yaml:5:36: probes.dns.cluster_dns: ", "needs peers.kubernetes"},
      {"cluster_dns_true_without_kubernetes",
       kSelf + "probes:\n  dns: {names: [a.b], cluster_dns: true}\n",
       "test.yaml:5:36: probes.dns.cluster_dns: ", "needs peers.kubernetes"},
      {"cluster_dns_bad_service",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b}\n"
               "probes:\n  dns: {names: [a.b], cluster_dns: {service: Kube_DNS}}\n",
       "test.yaml:7:46: probes.dns.cluster_dns.service: ",
       "must be a Kubernetes name (1-63 characters of a-z, 0-9 and '-'), got \"Kube_DNS\""},
      {"cluster_dns_zero_max_servers",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b}\n"
               "probes:\n  dns: {names: [a.b], cluster_dns: {max_servers: 0}}\n",
       "test.yaml:7:50: probes.dns.cluster_dns.max_servers: ", "must be from 1 to 256, got 0"},
      {"cluster_dns_unknown_key",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b}\n"
               "probes:\n  dns: {names: [a.b], cluster_dns: {selector: k8s-app}}\n",
       "test.yaml:7:37: probes.dns.cluster_dns.selector: ", "unknown key"},
      {"cluster_dns_not_bool",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b}\n"
               "probes:\n  dns: {names: [a.b], cluster_dns: off}\n",
       "test.yaml:7:36: probes.dns.cluster_dns: ", "must be true or false, got \"off\""},
      // probes.dns.sample (the same shape as cluster_dns).
      {"dns_sample_without_kubernetes",
       kSelf + "probes:\n  dns: {names: [a.b], sample: {pods_per_zone: 3}}\n",
       "test.yaml:5:31: probes.dns.sample: ", "needs peers.kubernetes"},
      {"dns_sample_zero_pods",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b}\n"
               "probes:\n  dns: {names: [a.b], sample: {pods_per_zone: 0}}\n",
       "test.yaml:7:47: probes.dns.sample.pods_per_zone: ", "must be from 1 to 1000, got 0"},
      {"dns_sample_zero_period",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b}\n"
               "probes:\n  dns: {names: [a.b], sample: {period: 0s}}\n",
       "test.yaml:7:40: probes.dns.sample.period: ", "must be a positive duration"},
      {"dns_sample_period_shorter_than_interval",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b}\n"
               "probes:\n  dns: {names: [a.b], sample: {period: 10s}}\n",
       "test.yaml:7:40: probes.dns.sample.period: ",
       "must be at least probes.dns.interval (30s), got 10s"},
      {"dns_sample_not_bool",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b}\n"
               "probes:\n  dns: {names: [a.b], sample: all}\n",
       "test.yaml:7:31: probes.dns.sample: ", "must be true or false, got \"all\""},
      {"burst_streams_empty", kSelf + "probes:\n  burst: {streams: []}\n",
       "test.yaml:5:20: probes.burst.streams: ", "must be a non-empty list"},
      {"burst_streams_zero", kSelf + "probes:\n  burst: {streams: [1, 0]}\n",
       "test.yaml:5:24: probes.burst.streams[1]: ", "must be from 1 to 128, got 0"},
      {"burst_bad_budget", kSelf + "probes:\n  burst: {max_bytes_per_hour: 20 gigs}\n",
       "test.yaml:5:31: probes.burst.max_bytes_per_hour: ", "must be a positive size"},
      {"burst_coordinated_period_shorter_than_interval",
       kSelf + "probes:\n  burst: {interval: 1h, coordinated: {period: 30m}}\n",
       "test.yaml:5:47: probes.burst.coordinated.period: ",
       "must be at least probes.burst.interval (1h), got 30m"},
      {"burst_coordinated_tiny_burst",
       kSelf + "probes:\n  burst: {coordinated: {max_bytes_per_burst: 100kB}}\n",
       "test.yaml:5:46: probes.burst.coordinated.max_bytes_per_burst: ", "must be at least 1MB"},
      {"burst_coordinated_unknown_key", kSelf + "probes:\n  burst: {coordinated: {every: 6h}}\n",
       "test.yaml:5:25: probes.burst.coordinated.every: ", "unknown key"},
      {"burst_round_longer_than_interval",
       kSelf + "probes:\n  burst: {interval: 10s, duration: 2s, streams: [1, 8]}\n",
       "test.yaml:5:10: probes.burst: ", "longer than interval 10s"},
      // probes.http.
      {"http_round_longer_than_interval", kSelf + "probes:\n  http: {interval: 2s, duration: 2s}\n",
       "test.yaml:5:9: probes.http: ", "a round lasts modes*(duration + timeout)"},
      {"http_unknown_mode", kSelf + "probes:\n  http: {modes: [keepalive, pipelined]}\n",
       "test.yaml:5:29: probes.http.modes[1]: ", "must be \"keepalive\" or \"new_connection\""},
      {"http_duplicate_mode", kSelf + "probes:\n  http: {modes: [keepalive, keepalive]}\n",
       "test.yaml:5:29: probes.http.modes[1]: ", "duplicate mode"},
      {"http_zero_qps", kSelf + "probes:\n  http: {qps: 0}\n",
       "test.yaml:5:15: probes.http.qps: ", "must be from 1 to 10000, got 0"},
      {"http_path_without_slash", kSelf + "probes:\n  http: {path: echo}\n",
       "test.yaml:5:16: probes.http.path: ", "must be a request path starting with /"},
      // peers.kubernetes and metrics.
      {"kubernetes_without_service", kSelf + "peers:\n  kubernetes: {namespace: podnet}\n",
       "test.yaml:5:15: peers.kubernetes.service: ", "required"},
      {"kubernetes_empty_namespace",
       kSelf + "peers:\n  kubernetes: {namespace: \"\", service: podnet}\n",
       "test.yaml:5:27: peers.kubernetes.namespace: ", "must not be empty"},
      {"kubernetes_zero_peers_per_zone",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b, peers_per_zone: 0}\n",
       "test.yaml:5:58: peers.kubernetes.peers_per_zone: ", "must be from 1 to 1000, got 0"},
      {"kubernetes_unknown_key",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b, label_selector: x}\n",
       "test.yaml:5:42: peers.kubernetes.label_selector: ", "unknown key"},
      {"kubernetes_discovery_unknown",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b, discovery: gossip}\n",
       "test.yaml:5:53: peers.kubernetes.discovery: ",
       "must be watch, dns or auto, got \"gossip\""},
      {"kubernetes_auto_dns_from_too_small",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b, auto_dns_from: 3}\n",
       "test.yaml:5:57: peers.kubernetes.auto_dns_from: ", "must be from 4 to 3399, got 3"},
      {"kubernetes_auto_dns_from_over_a_message",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b, auto_dns_from: 4000}\n",
       "test.yaml:5:57: peers.kubernetes.auto_dns_from: ", "must be from 4 to 3399, got 4000"},
      {"kubernetes_dns_refresh_too_short",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b, dns_refresh: 500ms}\n",
       "test.yaml:5:55: peers.kubernetes.dns_refresh: ", "must be from 1s to 1h"},
      {"kubernetes_dns_name_not_a_name",
       kSelf + "peers:\n  kubernetes: {namespace: a, service: b, dns_name: a..b}\n",
       "test.yaml:5:52: peers.kubernetes.dns_name: ", "not a valid DNS name: \"a..b\""},
      {"aggregate_peers_not_bool", kSelf + "metrics:\n  aggregate_peers: yes\n",
       "test.yaml:5:20: metrics.aggregate_peers: ", "must be true or false, got \"yes\""},
      {"native_histograms_list", kSelf + "metrics: {native_histograms: [true]}\n",
       "test.yaml:4:30: metrics.native_histograms: ", "must be true or false, got a list"},
      {"native_histograms_null", kSelf + "metrics: {native_histograms: ~}\n",
       "test.yaml:4:30: metrics.native_histograms: ", "must be true or false, got nothing (null)"},
      {"metrics_family_unknown",
       kSelf + "metrics:\n  families: {podnet_rtt_seconds: false, podnet_rtt_second: true}\n",
       "test.yaml:5:41: metrics.families.podnet_rtt_second: ", "unknown metric family"},
      {"metrics_family_bucket_suffix",
       kSelf + "metrics:\n  families:\n    podnet_rtt_seconds_bucket: false\n",
       "test.yaml:6:5: metrics.families.podnet_rtt_seconds_bucket: ", "unknown metric family"},
      {"metrics_family_not_bool", kSelf + "metrics:\n  families: {podnet_rtt_seconds: off}\n",
       "test.yaml:5:34: metrics.families.podnet_rtt_seconds: ", "must be true or false"},
      {"metrics_families_not_map", kSelf + "metrics:\n  families: [podnet_rtt_seconds]\n",
       "test.yaml:5:13: metrics.families: ", "must be a mapping"},
      {"per_peer_histograms_with_aggregate_peers",
       kSelf + "metrics: {aggregate_peers: true, per_peer_histograms: true}\n",
       "test.yaml:4:55: metrics.per_peer_histograms: ", "cannot be true with aggregate_peers"},
      {"burst_responder_fractional_duration",
       kSelf + "responders:\n  burst: {max_duration: 1500ms}\n",
       "test.yaml:5:25: responders.burst.max_duration: ", "must be whole seconds"},
      // Listen addresses.
      {"listen_address_hostname", kSelf + "listen_address: \"localhost:9479\"\n",
       "test.yaml:4:17: listen_address: ", "host must be an IP address, got \"localhost\""},
      {"listen_address_without_port", kSelf + "listen_address: 0.0.0.0\n",
       "test.yaml:4:17: listen_address: ", "expected \"HOST:PORT\""},
      {"listen_address_port_out_of_range", kSelf + "listen_address: \":65536\"\n",
       "test.yaml:4:17: listen_address: ", "port must be a number from 0 to 65535"},
      {"udp_echo_ipv6_without_brackets",
       kSelf + "responders:\n  udp_echo:\n    listen_address: \"::1:9479\"\n",
       "test.yaml:6:21: responders.udp_echo.listen_address: ", "an IPv6 host needs brackets"},
      // Environment expansion.
      {"unterminated_variable", "self:\n  name: \"${POD_NAME\"\n  node: node-a\n",
       "test.yaml:2:9: self.name: ", "unterminated \"${\" in \"${POD_NAME\""},
      {"bad_variable_name", "self:\n  name: ${POD-NAME}\n  node: node-a\n",
       "test.yaml:2:9: self.name: ", "bad environment variable name \"POD-NAME\""},
      // In a flow mapping an unquoted ${VAR} is a YAML syntax error; the message says what to do.
      {"unquoted_variable_in_flow_map", "self: {name: ${POD_NAME}, node: node-a}\n",
       "test.yaml:1:", "quote values with ${VAR}: \"${VAR}\""},
  };
}

class InvalidConfigTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidConfigTest, IsRejectedWithLocatedError) {
  const InvalidCase& c = GetParam();
  LoadResult r = Parse(c.text, "test.yaml", FakeEnv({}));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.config, nullptr);
  ASSERT_FALSE(r.errors.empty());
  bool found = false;
  for (const auto& e : r.errors) {
    EXPECT_EQ(e.file, "test.yaml");
    std::string s = e.ToString();
    if (s.rfind(c.prefix, 0) == 0 && s.find(c.message, c.prefix.size()) != std::string::npos) {
      found = true;
    }
  }
  EXPECT_TRUE(found) << "wanted an error starting with '" << c.prefix << "' containing '"
                     << c.message << "'; got:\n"
                     << Dump(r.errors);
}

INSTANTIATE_TEST_SUITE_P(Table, InvalidConfigTest, ::testing::ValuesIn(InvalidCases()),
                         [](const auto& info) { return info.param.name; });

TEST(ConfigTest, ErrorToStringFormat) {
  EXPECT_EQ((Error{"podnet.yaml", 12, 7, "probes.rtt.interval", "must be positive"}).ToString(),
            "podnet.yaml:12:7: probes.rtt.interval: must be positive");
  EXPECT_EQ((Error{"podnet.yaml", 3, 1, "", "malformed YAML: x"}).ToString(),
            "podnet.yaml:3:1: malformed YAML: x");
  EXPECT_EQ((Error{"/etc/podnet.yaml", 0, 0, "", "cannot read the file"}).ToString(),
            "/etc/podnet.yaml: cannot read the file");
}

TEST(ConfigTest, ReportsEveryProblemOfOneFile) {
  const std::string text =
      "listen_address: nowhere\n"               // 1
      "self:\n"                                 // 2
      "  name: \"\"\n"                          // 3
      "  node: node-a\n"                        // 4
      "peers:\n"                                // 5
      "  static:\n"                             // 6
      "    - {name: a, address: 10.0.0.300}\n"  // 7
      "probes:\n"                               // 8
      "  rtt:\n"                                // 9
      "    interval: 0s\n"                      // 10
      "    count: -1\n"                         // 11
      "  dns: {}\n"                             // 12
      "extra: 1\n";                             // 13
  LoadResult r = Parse(text, "test.yaml", FakeEnv({}));
  EXPECT_FALSE(r.ok());
  std::vector<std::string> want = {
      "test.yaml:1:17: listen_address: ",
      "test.yaml:3:9: self.name: ",
      "test.yaml:7:26: peers.static[0].address: ",
      "test.yaml:10:15: probes.rtt.interval: ",
      "test.yaml:11:12: probes.rtt.count: ",
      "test.yaml:12:8: probes.dns.names: ",
      "test.yaml:13:1: extra: ",
  };
  for (const auto& prefix : want) {
    int matches = 0;
    for (const auto& e : r.errors) matches += e.ToString().rfind(prefix, 0) == 0 ? 1 : 0;
    EXPECT_EQ(matches, 1) << prefix << "\n" << Dump(r.errors);
  }
  EXPECT_EQ(r.errors.size(), want.size()) << Dump(r.errors);
}

TEST(ConfigTest, BurstSections) {
  LoadResult r = Parse(kSelf +
                           "responders:\n  burst: {listen_address: \"[::]:5301\", "
                           "max_duration: 20s, max_clients: 3, max_streams: 8}\n"
                           "probes:\n  burst: {interval: 1h, duration: 1500ms, streams: [1, 4], "
                           "max_bytes_per_hour: 2GiB, timeout: 2s}\n",
                       "test.yaml", FakeEnv({}));
  ASSERT_TRUE(r.ok()) << Dump(r.errors);
  ASSERT_TRUE(r.config->burst.has_value());
  EXPECT_EQ(r.config->burst->interval, std::chrono::hours(1));
  EXPECT_EQ(r.config->burst->duration, std::chrono::milliseconds(1500));
  EXPECT_EQ(r.config->burst->streams, (std::vector<int>{1, 4}));
  EXPECT_EQ(r.config->burst->max_bytes_per_hour, 2ULL << 30);
  EXPECT_EQ(r.config->burst->step_timeout, std::chrono::seconds(2));
  // Coordinated bursts (with peers.kubernetes): the defaults bound the cluster's cost.
  EXPECT_EQ(r.config->burst->coordinated.period, std::chrono::hours(6));
  EXPECT_EQ(r.config->burst->coordinated.max_bytes_per_burst, 500'000'000ULL);
  LoadResult co = Parse(kSelf +
                            "probes:\n  burst: {interval: 1h, coordinated: "
                            "{period: 12h, max_bytes_per_burst: 1GB}}\n",
                        "test.yaml", FakeEnv({}));
  ASSERT_TRUE(co.ok()) << Dump(co.errors);
  EXPECT_EQ(co.config->burst->coordinated.period, std::chrono::hours(12));
  EXPECT_EQ(co.config->burst->coordinated.max_bytes_per_burst, 1'000'000'000ULL);
  // The default period follows a longer interval: every period has a round.
  LoadResult slow = Parse(kSelf + "probes:\n  burst: {interval: 24h}\n", "test.yaml", FakeEnv({}));
  ASSERT_TRUE(slow.ok()) << Dump(slow.errors);
  EXPECT_EQ(slow.config->burst->coordinated.period, std::chrono::hours(24));
  ASSERT_TRUE(r.config->burst_responder.has_value());
  EXPECT_EQ(r.config->burst_responder->listen_address.port, 5301);
  EXPECT_TRUE(r.config->burst_responder->listen_address.address.is_v6());
  EXPECT_EQ(r.config->burst_responder->max_duration, std::chrono::seconds(20));
  EXPECT_EQ(r.config->burst_responder->max_clients, 3);
  EXPECT_EQ(r.config->burst_responder->max_streams, 8);
  // Only probe Pods may test unless `clients: any` says otherwise.
  EXPECT_FALSE(r.config->burst_responder->any_client);
  LoadResult any =
      Parse(kSelf + "responders:\n  burst: {clients: any}\n", "test.yaml", FakeEnv({}));
  ASSERT_TRUE(any.ok()) << Dump(any.errors);
  EXPECT_TRUE(any.config->burst_responder->any_client);
  LoadResult pods =
      Parse(kSelf + "responders:\n  burst: {clients: probe_pods}\n", "test.yaml", FakeEnv({}));
  ASSERT_TRUE(pods.ok()) << Dump(pods.errors);
  EXPECT_FALSE(pods.config->burst_responder->any_client);
  LoadResult bad =
      Parse(kSelf + "responders:\n  burst: {clients: all}\n", "test.yaml", FakeEnv({}));
  ASSERT_EQ(bad.errors.size(), 1u) << Dump(bad.errors);
  EXPECT_NE(bad.errors[0].ToString().find("responders.burst.clients"), std::string::npos)
      << Dump(bad.errors);
  EXPECT_NE(bad.errors[0].ToString().find("\"all\""), std::string::npos) << Dump(bad.errors);
  // Absent sections are off; an empty one takes the defaults (port 5201).
  LoadResult off = Parse(kSelf, "test.yaml", FakeEnv({}));
  ASSERT_TRUE(off.ok()) << Dump(off.errors);
  EXPECT_FALSE(off.config->burst.has_value());
  EXPECT_FALSE(off.config->burst_responder.has_value());
  LoadResult on = Parse(kSelf + "responders:\n  burst: {}\n", "test.yaml", FakeEnv({}));
  ASSERT_TRUE(on.ok()) << Dump(on.errors);
  ASSERT_TRUE(on.config->burst_responder.has_value());
  EXPECT_EQ(on.config->burst_responder->listen_address.port, 5201);
}

TEST(ConfigTest, ShippedDefaultConfigLoads) {
  // The source tree the build was configured from (tests/CMakeLists.txt), not the working
  // directory nor this file's name as the compiler was given it (relative under a compiler
  // cache's base_dir).
  const std::string path = PODNET_SOURCE_DIR "/config/podnet.yaml";
  if (!std::ifstream(path)) PODNET_SKIP_UNLESS_CI("no " << path);
  // Without the Downward API variables the defaults in the file apply.
  LoadResult r = LoadFile(path, FakeEnv({}));
  ASSERT_TRUE(r.ok()) << Dump(r.errors);
  EXPECT_FALSE(r.config->self.name.empty());
  EXPECT_FALSE(r.config->self.node.empty());
  ASSERT_TRUE(r.config->rtt.has_value());
  ASSERT_TRUE(r.config->dns.has_value());
  EXPECT_EQ(r.config->dns->resolv_conf, "/etc/resolv.conf");
  ASSERT_TRUE(r.config->burst.has_value());
  ASSERT_TRUE(r.config->burst_responder.has_value());
  EXPECT_EQ(r.config->burst_responder->listen_address.port, 5201);
  ASSERT_TRUE(r.config->mtu.has_value());
  EXPECT_EQ(r.config->mtu->interval, std::chrono::minutes(10));
  // With them, they win.
  LoadResult k = LoadFile(path, FakeEnv({{"POD_NAME", "podnet-x1"},
                                         {"NODE_NAME", "ip-10-0-1-1"},
                                         {"POD_ZONE", "ap-northeast-2a"}}));
  ASSERT_TRUE(k.ok()) << Dump(k.errors);
  EXPECT_EQ(k.config->self, (topology::Self{"podnet-x1", "ip-10-0-1-1", "ap-northeast-2a"}));
}

TEST(ConfigTest, HttpSectionParses) {
  LoadResult r = Parse(kSelf +
                           "probes:\n  http: {interval: 10s, duration: 1s, qps: 50, "
                           "connections: 2, modes: [new_connection], timeout: 500ms, "
                           "path: /podnet/info, max_body_bytes: 1KiB}\n",
                       "test.yaml", FakeEnv({}));
  ASSERT_TRUE(r.ok()) << Dump(r.errors);
  ASSERT_TRUE(r.config->http.has_value());
  const auto& h = *r.config->http;
  EXPECT_EQ(h.interval, std::chrono::seconds(10));
  EXPECT_EQ(h.duration, std::chrono::seconds(1));
  EXPECT_EQ(h.qps, 50);
  EXPECT_EQ(h.connections, 2);
  EXPECT_FALSE(h.keepalive);
  EXPECT_TRUE(h.new_connection);
  EXPECT_EQ(h.timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(h.path, "/podnet/info");
  EXPECT_EQ(h.max_body_bytes, 1024u);
  // Defaults (docs/design.md, "Configuration"): both modes, 100 qps over 4 connections for 2 s
  // every 30 s.
  LoadResult d = Parse(kSelf + "probes:\n  http: {}\n", "test.yaml", FakeEnv({}));
  ASSERT_TRUE(d.ok()) << Dump(d.errors);
  EXPECT_TRUE(d.config->http->keepalive && d.config->http->new_connection);
  EXPECT_EQ(d.config->http->qps, 100);
}

TEST(ConfigTest, GrpcSectionsParse) {
  LoadResult r = Parse(kSelf +
                           "responders:\n  grpc: {listen_address: \"127.0.0.1:9555\"}\n"
                           "probes:\n  grpc: {interval: 5s, count: 4, spacing: 50ms, "
                           "timeout: 500ms, port: 9555}\n",
                       "test.yaml", FakeEnv({}));
#ifdef PODNET_WITH_GRPC
  ASSERT_TRUE(r.ok()) << Dump(r.errors);
  ASSERT_TRUE(r.config->grpc.has_value());
  EXPECT_EQ(r.config->grpc->count, 4);
  EXPECT_EQ(r.config->grpc->port, 9555);
  ASSERT_TRUE(r.config->grpc_listen_address.has_value());
  EXPECT_EQ(r.config->grpc_listen_address->port, 9555);
  LoadResult bad = Parse(kSelf + "probes:\n  grpc: {interval: 1s, count: 20, spacing: 100ms}\n",
                         "test.yaml", FakeEnv({}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(Dump(bad.errors).find("probes.grpc: a round lasts"), std::string::npos);
#else
  ASSERT_FALSE(r.ok());
  EXPECT_NE(Dump(r.errors).find("not supported by this build"), std::string::npos);
#endif
}

TEST(ConfigTest, ServiceSectionParses) {
  using config::kinds::service::ServiceProtocol;
  LoadResult r = Parse(kSelf +
                           "probes:\n"
                           "  service:\n"
                           "    interval: 10s\n"
                           "    count: 30\n"
                           "    spacing: 20ms\n"
                           "    timeout: 1s\n"
                           "    targets:\n"
                           "      - { name: podnet-udp, address: 10.96.12.34, port: 9479, "
                           "protocol: udp }\n"
                           "      - { name: podnet-http, address: podnet.podnet.svc, port: 9479, "
                           "protocol: http }\n"
                           "      - { name: default, address: \"fd00::1\" }\n",
                       "test.yaml", FakeEnv({}));
  ASSERT_TRUE(r.ok()) << Dump(r.errors);
  ASSERT_TRUE(r.config->service.has_value());
  const auto& s = *r.config->service;
  EXPECT_EQ(s.interval, 10s);
  EXPECT_EQ(s.count, 30);
  EXPECT_EQ(s.spacing, 20ms);
  EXPECT_EQ(s.timeout, 1s);
  ASSERT_EQ(s.targets.size(), 3u);
  EXPECT_EQ(s.targets[0], (config::kinds::service::ServiceTarget{"podnet-udp", "10.96.12.34", 9479,
                                                                 ServiceProtocol::kUdp, "", ""}));
  // A Service DNS name names its Kubernetes Service (NAME.NAMESPACE.svc).
  EXPECT_EQ(s.targets[1],
            (config::kinds::service::ServiceTarget{"podnet-http", "podnet.podnet.svc", 9479,
                                                   ServiceProtocol::kHttp, "podnet", "podnet"}));
  // Defaults: port 9479, udp.
  EXPECT_EQ(s.targets[2], (config::kinds::service::ServiceTarget{"default", "fd00::1", 9479,
                                                                 ServiceProtocol::kUdp, "", ""}));
  EXPECT_EQ(EnabledProbes(*r.config), std::vector<std::string>{"service"});
}

// Every problem with its place (line:column from the file's start; kSelf is lines 1-3) and key.
// The Kubernetes Service of a target: explicit, or read from a Service DNS name.
TEST(ConfigTest, ServiceTargetsNameTheirKubernetesService) {
  LoadResult r = Parse(kSelf +
                           "probes:\n  service:\n    targets:\n"
                           "      - {name: a, address: 10.96.0.10, kubernetes_service: shop/api}\n"
                           "      - {name: b, address: Web.Shop.SVC.cluster.local.}\n"
                           "      - {name: c, address: web.shop.svcx}\n"
                           "      - {name: d, address: web.svc}\n",
                       "test.yaml", FakeEnv({}));
  ASSERT_TRUE(r.ok()) << Dump(r.errors);
  const auto& t = r.config->service->targets;
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].kubernetes_namespace + "/" + t[0].kubernetes_name, "shop/api");
  EXPECT_EQ(t[1].kubernetes_namespace + "/" + t[1].kubernetes_name, "shop/web");
  EXPECT_EQ(t[2].kubernetes_namespace + "/" + t[2].kubernetes_name, "/");
  EXPECT_EQ(t[3].kubernetes_namespace + "/" + t[3].kubernetes_name, "/");
}

TEST(ConfigTest, ServiceSectionErrorsSayWhereAndWhich) {
  struct Case {
    std::string yaml;  // from line 4
    std::string want;
  };
  for (const Case& c : {
           Case{"probes:\n  service: {}\n",
                "test.yaml:5:12: probes.service.targets: required: a non-empty list"},
           Case{"probes:\n  service:\n    targets: []\n",
                "test.yaml:6:14: probes.service.targets: required: a non-empty list"},
           Case{"probes:\n  service:\n    targets:\n      - {address: 10.0.0.1}\n",
                "test.yaml:7:9: probes.service.targets[0].name: required"},
           Case{"probes:\n  service:\n    targets:\n      - {name: a, address: \"not a name\"}\n",
                "test.yaml:7:28: probes.service.targets[0].address: must be an IP address or a "
                "DNS name, got \"not a name\""},
           Case{"probes:\n  service:\n    targets:\n      - {name: a, address: b, port: 0}\n",
                "test.yaml:7:37: probes.service.targets[0].port: must be from 1 to 65535, got 0"},
           Case{"probes:\n  service:\n    targets:\n      - {name: a, address: b, protocol: tcp}\n",
                "test.yaml:7:41: probes.service.targets[0].protocol: must be \"udp\" or \"http\", "
                "got \"tcp\""},
           Case{"probes:\n  service:\n    targets:\n      - {name: a, address: b}\n"
                "      - {name: a, address: c}\n",
                "test.yaml:8:16: probes.service.targets[1].name: duplicate target name \"a\" (also "
                "probes.service.targets[0])"},
           Case{"probes:\n  service:\n    targets:\n      - {name: a, address: b, zone: z}\n",
                "test.yaml:7:31: probes.service.targets[0].zone: unknown key"},
           Case{"probes:\n  service:\n    targets:\n"
                "      - {name: a, address: b, kubernetes_service: Shop/api}\n",
                "test.yaml:7:51: probes.service.targets[0].kubernetes_service: must be "
                "NAMESPACE/NAME (lower-case DNS labels), got \"Shop/api\""},
           Case{"probes:\n  service:\n    targets:\n"
                "      - {name: a, address: b, kubernetes_service: api}\n",
                "test.yaml:7:51: probes.service.targets[0].kubernetes_service: must be "
                "NAMESPACE/NAME"},
           Case{"probes:\n  service:\n    count: 100\n    spacing: 100ms\n"
                "    targets: [{name: a, address: b}]\n",
                "test.yaml:6:5: probes.service: a round lasts timeout + (count-1)*spacing + "
                "timeout = 11s900ms, longer than interval 10s"},
       }) {
    LoadResult r = Parse(kSelf + c.yaml, "test.yaml", FakeEnv({}));
    EXPECT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(Dump(r.errors).find(c.want), std::string::npos)
        << c.yaml << "want: " << c.want << "\ngot:\n"
        << Dump(r.errors);
  }
}

TEST(ConfigTest, KubernetesPeersAndAggregation) {
  LoadResult r = Parse(kSelf +
                           "peers:\n  kubernetes: {namespace: podnet, service: probes, "
                           "peers_per_zone: 5, port: 19479}\nmetrics: {aggregate_peers: true}\n",
                       "test.yaml", FakeEnv({}));
  ASSERT_TRUE(r.ok()) << Dump(r.errors);
  ASSERT_TRUE(r.config->kubernetes.has_value());
  EXPECT_EQ(r.config->kubernetes->namespace_name, "podnet");
  EXPECT_EQ(r.config->kubernetes->service, "probes");
  EXPECT_EQ(r.config->kubernetes->peers_per_zone, 5);
  EXPECT_EQ(r.config->kubernetes->port, 19479);
  EXPECT_EQ(r.config->kubernetes->burst_port, 5201);
  EXPECT_EQ(r.config->kubernetes->discovery, KubernetesPeers::Discovery::kWatch);
  EXPECT_EQ(r.config->kubernetes->DnsName(), "probes.podnet.svc.cluster.local");
  EXPECT_TRUE(r.config->aggregate_peers);

  LoadResult dns = Parse(kSelf +
                             "peers:\n  kubernetes: {namespace: podnet, service: probes, "
                             "discovery: dns, dns_name: probes.example., dns_refresh: 45s}\n",
                         "test.yaml", FakeEnv({}));
  ASSERT_TRUE(dns.ok()) << Dump(dns.errors);
  EXPECT_EQ(dns.config->kubernetes->discovery, KubernetesPeers::Discovery::kDns);
  EXPECT_EQ(dns.config->kubernetes->DnsName(), "probes.example.");
  EXPECT_EQ(dns.config->kubernetes->dns_refresh, std::chrono::seconds(45));
  // --config.check's summary says where the peers come from.
  EXPECT_NE(Summary(*dns.config).find("(3 per zone, from the DNS records of probes.example.)"),
            std::string::npos)
      << Summary(*dns.config);
  EXPECT_EQ(Summary(*r.config).find("DNS records"), std::string::npos) << Summary(*r.config);

  LoadResult automatic = Parse(kSelf +
                                   "peers:\n  kubernetes: {namespace: podnet, service: probes, "
                                   "discovery: auto, auto_dns_from: 250}\n",
                               "test.yaml", FakeEnv({}));
  ASSERT_TRUE(automatic.ok()) << Dump(automatic.errors);
  EXPECT_EQ(automatic.config->kubernetes->discovery, KubernetesPeers::Discovery::kAuto);
  EXPECT_EQ(automatic.config->kubernetes->auto_dns_from, 250);
  EXPECT_EQ(r.config->kubernetes->auto_dns_from, 100);  // the default
  EXPECT_NE(Summary(*automatic.config)
                .find("from the DNS records of probes.podnet.svc.cluster.local from 250 Pods on, "
                      "else the EndpointSlices"),
            std::string::npos)
      << Summary(*automatic.config);

  LoadResult plain = Parse(kSelf, "test.yaml", FakeEnv({}));
  ASSERT_TRUE(plain.ok()) << Dump(plain.errors);
  EXPECT_FALSE(plain.config->kubernetes.has_value());
  EXPECT_FALSE(plain.config->aggregate_peers);
}

TEST(ConfigTest, MetricFamiliesAndPerPeerHistograms) {
  LoadResult plain = Parse(kSelf, "test.yaml", FakeEnv({}));
  ASSERT_TRUE(plain.ok()) << Dump(plain.errors);
  EXPECT_FALSE(plain.config->per_peer_histograms);
  // Off by default: the families metric_families.cc marks so, and only those.
  std::set<std::string, std::less<>> want_off;
  for (const auto& f : MetricFamilies()) {
    if (!f.on_by_default) want_off.emplace(f.name);
  }
  EXPECT_EQ(plain.config->families_off, want_off);
  EXPECT_TRUE(want_off.contains("podnet_http_time_to_first_byte_seconds"));
  EXPECT_TRUE(want_off.contains("podnet_http_connect_duration_seconds"));

  LoadResult r = Parse(kSelf +
                           "metrics:\n  per_peer_histograms: true\n  families:\n"
                           "    podnet_http_time_to_first_byte_seconds: true\n"
                           "    podnet_dns_server_rtt_seconds: false\n",
                       "test.yaml", FakeEnv({}));
  ASSERT_TRUE(r.ok()) << Dump(r.errors);
  EXPECT_TRUE(r.config->per_peer_histograms);
  EXPECT_FALSE(r.config->families_off.contains("podnet_http_time_to_first_byte_seconds"));
  EXPECT_TRUE(r.config->families_off.contains("podnet_http_connect_duration_seconds"));
  EXPECT_TRUE(r.config->families_off.contains("podnet_dns_server_rtt_seconds"));
  EXPECT_FALSE(r.config->native_histograms);
  EXPECT_FALSE(plain.config->native_histograms);

  // Native histograms: with aggregate_peers too (per group then); a non-bool is an error.
  LoadResult native = Parse(kSelf + "metrics: {aggregate_peers: true, native_histograms: true}\n",
                            "test.yaml", FakeEnv({}));
  ASSERT_TRUE(native.ok()) << Dump(native.errors);
  EXPECT_TRUE(native.config->native_histograms);
  LoadResult bad = Parse(kSelf + "metrics: {native_histograms: 1}\n", "test.yaml", FakeEnv({}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(Dump(bad.errors).find("metrics.native_histograms"), std::string::npos);
}

TEST(ConfigTest, LoadFileMissing) {
  const std::string path = "/nonexistent-podnet-dir/podnet.yaml";
  LoadResult r = LoadFile(path, FakeEnv({}));
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].file, path);
  EXPECT_EQ(r.errors[0].line, 0);
  EXPECT_EQ(r.errors[0].ToString(), path + ": cannot read the file: No such file or directory");
}

TEST(ConfigTest, LoadFileOnADirectorySaysSo) {
  LoadResult r = LoadFile("/tmp", FakeEnv({}));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].ToString(),
            "/tmp: cannot read the file: it is a directory (only regular files are read)");
}

TEST(ConfigTest, UnsetVariableIsAWarningWithItsPlace) {
  LoadResult r = Parse("self:\n  name: a\n  node: n\n  zone: ${POD_ZOEN}\n", "test.yaml",
                       FakeEnv({{"POD_ZONE", "z"}}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.config->self.zone, "");
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0].ToString(),
            "test.yaml:4:9: self.zone: environment variable POD_ZOEN is not set; it expanded "
            "to \"\"");
  // A default, or a set variable, is no warning.
  r = Parse("self:\n  name: a\n  node: ${N:-n}\n  zone: ${POD_ZONE}\n", "test.yaml",
            FakeEnv({{"POD_ZONE", "z"}}));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.warnings.empty());
}

TEST(ConfigTest, UnquotedBracketedIpv6GetsAHint) {
  LoadResult r =
      Parse("listen_address: [::]:9479\nself: {name: a, node: n}\n", "test.yaml", FakeEnv({}));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("quote bracketed IPv6 addresses"), std::string::npos)
      << r.errors[0].message;
}

TEST(ConfigTest, OtherYamlErrorsGetNoIpv6Hint) {
  // A quoted bracketed address elsewhere in the file, and a flow sequence: a mis-indented key
  // is not an IPv6 problem (the hint used to follow every syntax error of such a file).
  LoadResult r = Parse(
      "listen_address: \"[::]:9479\"\nself: {name: a, node: n}\nprobes:\n  dns: {names: [a]}\n"
      "   rtt: {}\n",
      "test.yaml", FakeEnv({}));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("malformed YAML"), std::string::npos) << r.errors[0].message;
  EXPECT_EQ(r.errors[0].message.find("IPv6"), std::string::npos) << r.errors[0].message;
}

TEST(ConfigTest, LoadFileReadsAndNamesTheFile) {
  char path[] = "/tmp/podnet-config-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(path);
    out << kSelf << "bogus: 1\n";
  }
  LoadResult bad = LoadFile(path, FakeEnv({}));
  ASSERT_EQ(bad.errors.size(), 1u) << Dump(bad.errors);
  EXPECT_EQ(bad.errors[0].ToString().rfind(std::string(path) + ":4:1: bogus: ", 0), 0u)
      << bad.errors[0].ToString();
  {
    std::ofstream out(path);
    out << kSelf;
  }
  LoadResult good = LoadFile(path, FakeEnv({}));
  std::remove(path);
  ASSERT_TRUE(good.ok()) << Dump(good.errors);
  EXPECT_EQ(good.config->file, path);
  EXPECT_EQ(good.config->self.name, "pod-a");
}

TEST(ConfigTest, DnsSection) {
  using podnet::config::kinds::dns::Libc;
  LoadResult r =
      Parse(kSelf +
                "probes:\n  dns:\n    interval: 15s\n    resolv_conf: /tmp/r.conf\n"
                "    resolvers: [musl]\n"
                "    names: [kubernetes.default, \"sts.ap-northeast-2.amazonaws.com.\"]\n",
            "test.yaml", FakeEnv({}));
  ASSERT_TRUE(r.ok()) << Dump(r.errors);
  ASSERT_TRUE(r.config->dns.has_value());
  EXPECT_EQ(r.config->dns->interval, 15s);
  EXPECT_EQ(r.config->dns->resolv_conf, "/tmp/r.conf");
  EXPECT_EQ(r.config->dns->resolvers, std::vector<Libc>{Libc::kMusl});
  EXPECT_EQ(r.config->dns->names,
            (std::vector<std::string>{"kubernetes.default", "sts.ap-northeast-2.amazonaws.com."}));
  // Defaults: every 30 s, /etc/resolv.conf, both resolvers.
  LoadResult d = Parse(kSelf + "probes:\n  dns: {names: [a.example]}\n", "test.yaml", FakeEnv({}));
  ASSERT_TRUE(d.ok()) << Dump(d.errors);
  EXPECT_EQ(d.config->dns->interval, 30s);
  EXPECT_EQ(d.config->dns->resolv_conf, "/etc/resolv.conf");
  EXPECT_EQ(d.config->dns->resolvers, (std::vector<Libc>{Libc::kGlibc, Libc::kMusl}));
  EXPECT_FALSE(d.config->rtt.has_value());
}

TEST(ConfigTest, ClusterDnsDefaultsWithKubernetesOnly) {
  const std::string k8s = "peers:\n  kubernetes: {namespace: podnet, service: podnet}\n";
  // With peers.kubernetes, on by default: kube-system/kube-dns on port 53, at most 16.
  LoadResult on = Parse(kSelf + k8s + "probes:\n  dns: {names: [a.b]}\n", "test.yaml", FakeEnv({}));
  ASSERT_TRUE(on.ok()) << Dump(on.errors);
  ASSERT_TRUE(on.config->dns->cluster_dns.has_value());
  EXPECT_EQ(*on.config->dns->cluster_dns, config::kinds::dns::ClusterDnsOptions{});
  EXPECT_EQ(on.config->dns->cluster_dns->namespace_name, "kube-system");
  EXPECT_EQ(on.config->dns->cluster_dns->service, "kube-dns");
  EXPECT_EQ(on.config->dns->cluster_dns->port, 53);
  EXPECT_EQ(on.config->dns->cluster_dns->max_servers, 16);
  EXPECT_NE(Summary(*on.config).find("DNS servers of kubernetes service kube-system/kube-dns"),
            std::string::npos)
      << Summary(*on.config);

  // Every key set.
  LoadResult set = Parse(kSelf + k8s +
                             "probes:\n  dns:\n    names: [a.b]\n    cluster_dns: {namespace: dns, "
                             "service: coredns, port: 5353, max_servers: 3}\n",
                         "test.yaml", FakeEnv({}));
  ASSERT_TRUE(set.ok()) << Dump(set.errors);
  const auto& cd = *set.config->dns->cluster_dns;
  EXPECT_EQ(cd.namespace_name, "dns");
  EXPECT_EQ(cd.service, "coredns");
  EXPECT_EQ(cd.port, 5353);
  EXPECT_EQ(cd.max_servers, 3);

  // `false` turns it off; so does the absence of peers.kubernetes (no API server to ask).
  LoadResult off = Parse(kSelf + k8s + "probes:\n  dns: {names: [a.b], cluster_dns: false}\n",
                         "test.yaml", FakeEnv({}));
  ASSERT_TRUE(off.ok()) << Dump(off.errors);
  EXPECT_FALSE(off.config->dns->cluster_dns.has_value());
  LoadResult plain = Parse(kSelf + "probes:\n  dns: {names: [a.b]}\n", "test.yaml", FakeEnv({}));
  ASSERT_TRUE(plain.ok()) << Dump(plain.errors);
  EXPECT_FALSE(plain.config->dns->cluster_dns.has_value());
  LoadResult plain_off = Parse(kSelf + "probes:\n  dns: {names: [a.b], cluster_dns: false}\n",
                               "test.yaml", FakeEnv({}));
  EXPECT_TRUE(plain_off.ok()) << Dump(plain_off.errors);
}

TEST(ConfigTest, DnsSampleDefaultsWithKubernetesOnly) {
  const std::string k8s = "peers:\n  kubernetes: {namespace: podnet, service: podnet}\n";
  // With peers.kubernetes, on by default: 2 Pods a zone, drawn every hour.
  LoadResult on = Parse(kSelf + k8s + "probes:\n  dns: {names: [a.b]}\n", "test.yaml", FakeEnv({}));
  ASSERT_TRUE(on.ok()) << Dump(on.errors);
  ASSERT_TRUE(on.config->dns->sample.has_value());
  EXPECT_EQ(on.config->dns->sample->pods_per_zone, 2);
  EXPECT_EQ(on.config->dns->sample->period, 1h);
  EXPECT_EQ(on.config->dns->sample->replica_pods_per_zone, 6);
  LoadResult set = Parse(
      kSelf + k8s + "probes:\n  dns: {names: [a.b], sample: {pods_per_zone: 5, period: 10m}}\n",
      "test.yaml", FakeEnv({}));
  ASSERT_TRUE(set.ok()) << Dump(set.errors);
  EXPECT_EQ(*set.config->dns->sample, (config::kinds::dns::DnsSampleOptions{5, 10min}));
  LoadResult replicas =
      Parse(kSelf + k8s + "probes:\n  dns: {names: [a.b], sample: {replica_pods_per_zone: 9}}\n",
            "test.yaml", FakeEnv({}));
  ASSERT_TRUE(replicas.ok()) << Dump(replicas.errors);
  EXPECT_EQ(*replicas.config->dns->sample, (config::kinds::dns::DnsSampleOptions{2, 1h, 9}));
  LoadResult none =
      Parse(kSelf + k8s + "probes:\n  dns: {names: [a.b], sample: {replica_pods_per_zone: 0}}\n",
            "test.yaml", FakeEnv({}));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(Dump(none.errors).find("probes.dns.sample.replica_pods_per_zone"), std::string::npos)
      << Dump(none.errors);
  // A longer interval than the default period: the period follows it, written or not.
  for (const char* sample : {"", ", sample: true", ", sample: {pods_per_zone: 1}"}) {
    LoadResult slow =
        Parse(kSelf + k8s + "probes:\n  dns: {names: [a.b], interval: 2h" + sample + "}\n",
              "test.yaml", FakeEnv({}));
    ASSERT_TRUE(slow.ok()) << Dump(slow.errors);
    EXPECT_EQ(slow.config->dns->sample->period, 2h) << sample;
  }
  // `false`: every Pod looks up; without peers.kubernetes there is no sample (and `false` is
  // accepted there too).
  LoadResult off = Parse(kSelf + k8s + "probes:\n  dns: {names: [a.b], sample: false}\n",
                         "test.yaml", FakeEnv({}));
  ASSERT_TRUE(off.ok()) << Dump(off.errors);
  EXPECT_FALSE(off.config->dns->sample.has_value());
  LoadResult plain =
      Parse(kSelf + "probes:\n  dns: {names: [a.b], sample: false}\n", "test.yaml", FakeEnv({}));
  ASSERT_TRUE(plain.ok()) << Dump(plain.errors);
  EXPECT_FALSE(plain.config->dns->sample.has_value());
}

}  // namespace
}  // namespace podnet::config
