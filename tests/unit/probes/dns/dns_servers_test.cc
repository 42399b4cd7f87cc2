// The DNS probe's server target against real UDP servers on loopback: each discovered cluster
// DNS replica (ProbeEnv::dns_servers) gets its podnet_dns_server_rtt_seconds series with its
// zone and path class, and loses it when it goes away.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include "exporter/metrics/metrics.h"
#include "exporter/probes/dns/dns_probe.h"
#include "tests/unit/probes/dns/dns_kind_fixture.h"
#include "tests/unit/testing/loop.h"
#include "tests/unit/testing/loopback_dns.h"
#include "tests/unit/testing/peers.h"

namespace podnet::probes::dns {
namespace {

using podnet::testing::CounterValue;
using podnet::testing::FindSeries;
using podnet::testing::LoopbackDns;
using podnet::testing::MakePeer;
using topology::PathClass;

const topology::Self kSelf{"probe-a", "node-1", "zone-a"};

class DnsServersTest : public podnet::testing::DnsKindFixture {
 protected:
  DnsServersTest() : DnsKindFixture(kSelf) {}

  // The servers target of a DNS kind asking for example.test (it holds its kind).
  std::shared_ptr<PeerProbe> ServersProbe() {
    DnsOptions o;
    o.names = {"example.test"};
    o.resolv_conf = resolv_conf_;
    return MakeDnsKind(o, env_)->ForTarget("|servers|");
  }

  // The replica's histogram sample count; -1 when it has no series.
  double Answers(const std::string& server) {
    auto m = FindSeries(metrics_.registry(), "podnet_dns_server_rtt_seconds", {{"server", server}});
    return m ? static_cast<double>(m->histogram.sample_count) : -1;
  }
  std::string Label(const std::string& server, const std::string& key) {
    auto m = FindSeries(metrics_.registry(), "podnet_dns_server_rtt_seconds", {{"server", server}});
    if (!m) return "<none>";
    for (const auto& l : m->label) {
      if (l.name == key) return l.value;
    }
    return "<unset>";
  }
};

TEST_F(DnsServersTest, EachReplicaHasItsZoneAndPathAndGoesWhenItGoes) {
  LoopbackDns near(io_, {"example.test"});
  LoopbackDns far(io_, {"example.test"});
  std::string near_server = "127.0.0.1:" + std::to_string(near.port());
  std::string far_server = "127.0.0.1:" + std::to_string(far.port());
  env_.dns_servers = {
      MakePeer("coredns-near", "127.0.0.1", "node-1", "zone-a", PathClass::kSameNode, near.port()),
      MakePeer("coredns-far", "127.0.0.1", "node-3", "zone-c", PathClass::kCrossZone, far.port())};
  auto probe = ServersProbe();
  ASSERT_NE(probe, nullptr);

  Round(*probe);
  EXPECT_EQ(near.questions, 1);
  EXPECT_EQ(far.questions, 1);
  EXPECT_EQ(Answers(near_server), 1);
  EXPECT_EQ(Label(near_server, "server_zone"), "zone-a");
  EXPECT_EQ(Label(near_server, "path_class"), "same_node");
  EXPECT_EQ(Answers(far_server), 1);
  EXPECT_EQ(Label(far_server, "server_zone"), "zone-c");
  EXPECT_EQ(Label(far_server, "path_class"), "cross_zone");
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_probe_errors_total",
                         {{"probe", "dns"}, {"reason", "servers_over_cap"}}),
            -1);

  // The far replica leaves the Service (and the cap left one more out): its series goes at the
  // next round, the near one's goes on, the left-out one is counted.
  env_.dns_servers.pop_back();
  env_.dns_servers_over_cap = 1;
  Round(*probe);
  EXPECT_EQ(Answers(far_server), -1);
  EXPECT_EQ(far.questions, 1);
  EXPECT_EQ(Answers(near_server), 2);
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_probe_errors_total",
                         {{"probe", "dns"}, {"reason", "servers_over_cap"}}),
            1);

  // A replica whose zone changes (relabelled node) is one new series, not two.
  env_.dns_servers[0].zone = "zone-b";
  env_.dns_servers[0].path = PathClass::kCrossZone;
  Round(*probe);
  EXPECT_EQ(Answers(near_server), 1);
  EXPECT_EQ(Label(near_server, "server_zone"), "zone-b");

  // The probe removed: nothing of it stays.
  probe->RemoveSeries();
  EXPECT_EQ(Answers(near_server), -1);
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_probe_errors_total",
                         {{"probe", "dns"}, {"reason", "servers_over_cap"}}),
            -1);
}

// What each server is asked: in a Pod (kubelet's search list), the API server's Service, which
// exists in every cluster; elsewhere the first name, absolute.
TEST(ServerQuestionTest, TheKubernetesServiceWhereTheSearchListNamesTheZone) {
  EXPECT_EQ(ServerQuestion({"podnet.svc.cluster.local", "svc.cluster.local", "cluster.local"},
                           "sts.example"),
            "kubernetes.default.svc.cluster.local.");
  EXPECT_EQ(ServerQuestion(
                {"podnet.svc.k8s.example.", "svc.k8s.example.", "k8s.example.", "ec2.internal"},
                "sts.example"),
            "kubernetes.default.svc.k8s.example.");
  // A Pod in namespace `svc`: its first entry starts with "svc." too.
  EXPECT_EQ(ServerQuestion({"svc.svc.cluster.local", "svc.cluster.local", "cluster.local"},
                           "sts.example"),
            "kubernetes.default.svc.cluster.local.");
  EXPECT_EQ(ServerQuestion({"svc.", "corp.example"}, "sts.example"), "sts.example.");
  EXPECT_EQ(ServerQuestion({"corp.example"}, "sts.example"), "sts.example.");
  EXPECT_EQ(ServerQuestion({}, "sts.example."), "sts.example.");
}

TEST_F(DnsServersTest, EachServerIsAskedANameThatExists) {
  std::ofstream(resolv_conf_) << "nameserver 127.0.0.1\n"
                                 "search podnet.svc.cluster.local svc.cluster.local cluster.local\n"
                                 "options ndots:5 timeout:1 attempts:1\n";
  LoopbackDns replica(io_, {"kubernetes.default.svc.cluster.local"});
  env_.dns_servers = {
      MakePeer("coredns", "127.0.0.1", "node-1", "zone-a", PathClass::kSameNode, replica.port())};
  auto probe = ServersProbe();
  ASSERT_NE(probe, nullptr);
  Round(*probe);
  EXPECT_EQ(replica.names, std::set<std::string>{"kubernetes.default.svc.cluster.local"});
  EXPECT_EQ(Answers("127.0.0.1:" + std::to_string(replica.port())), 1);
}

// A replica that answers SERVFAIL (or REFUSED) serves no lookup: its answers are not timed,
// so its series stands still as a silent replica's does (PodnetDNSServerDown reads that), and
// each is counted as an error.
TEST_F(DnsServersTest, AReplicaAnsweringServfailIsNotTimed) {
  LoopbackDns good(io_, {"example.test"});
  LoopbackDns failing(io_, {"example.test"});
  std::string good_server = "127.0.0.1:" + std::to_string(good.port());
  std::string failing_server = "127.0.0.1:" + std::to_string(failing.port());
  env_.dns_servers = {
      MakePeer("coredns-good", "127.0.0.1", "node-1", "zone-a", PathClass::kSameNode, good.port()),
      MakePeer("coredns-bad", "127.0.0.1", "node-2", "zone-b", PathClass::kCrossZone,
               failing.port())};
  auto probe = ServersProbe();
  ASSERT_NE(probe, nullptr);

  Round(*probe);  // both answer: both timed
  EXPECT_EQ(Answers(good_server), 1);
  EXPECT_EQ(Answers(failing_server), 1);

  failing.rcode = 2;  // SERVFAIL from now on
  Round(*probe);
  EXPECT_EQ(failing.questions, 2);
  EXPECT_EQ(Answers(failing_server), 1);  // stands still
  EXPECT_EQ(Answers(good_server), 2);
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_probe_errors_total",
                         {{"probe", "dns"}, {"reason", "server_error_rcode"}}),
            1);

  failing.rcode = 5;  // REFUSED
  Round(*probe);
  EXPECT_EQ(Answers(failing_server), 1);
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_probe_errors_total",
                         {{"probe", "dns"}, {"reason", "server_error_rcode"}}),
            2);
}

}  // namespace
}  // namespace podnet::probes::dns
