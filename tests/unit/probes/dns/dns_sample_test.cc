// probes.dns.sample: with discovered probe Pods, only the sampled Pods of each zone run the
// lookups, and a Pod outside the sample keeps no lookup series; every Pod still times the
// servers and says whether it is in the sample (podnet_dns_lookup_sampled).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exporter/probes/dns/dns_probe.h"
#include "exporter/topology/sample.h"
#include "tests/unit/probes/dns/dns_kind_fixture.h"
#include "tests/unit/testing/loop.h"
#include "tests/unit/testing/loopback_dns.h"
#include "tests/unit/testing/peers.h"

namespace podnet::probes::dns {
namespace {

using namespace std::chrono_literals;
using podnet::testing::CounterValue;
using podnet::testing::FindSeries;
using podnet::testing::LoopbackDns;
using podnet::testing::MakePeer;
using topology::PathClass;

const topology::Self kSampleSelf{"podnet-x1", "node-1", "zone-a"};
constexpr auto kPeriod = 1h;

class DnsSampleTest : public podnet::testing::DnsKindFixture {
 protected:
  DnsSampleTest() : DnsKindFixture(kSampleSelf) {
    // Four Pods in self's zone, four in another; self is node-1's Pod.
    for (int i = 1; i <= 8; ++i) {
      auto p = MakePeer("node-" + std::to_string(i), "127.0.0.1", "node-" + std::to_string(i),
                        i <= 4 ? "zone-a" : "zone-b", PathClass::kUnknown);
      p.pod = i == 1 ? kSampleSelf.name : "podnet-x" + std::to_string(i);
      pods_.push_back(p);
    }
    env_.wall_clock = [this] { return now_; };
  }

  std::shared_ptr<ProbeKind> Kind(std::optional<DnsSampleOptions> sample) {
    DnsOptions o;
    o.names = {"example.test"};
    o.resolvers = {Libc::kGlibc};
    o.resolv_conf = resolv_conf_;
    o.cluster_dns.reset();
    o.sample = sample;
    return MakeDnsKind(o, env_);
  }

  // The start of a period in which self is (or is not) one of its zone's `count`, and (when
  // `also` is set) one of its zone's `also->second` exactly when `also->first`.
  std::chrono::system_clock::time_point PeriodWhereSelf(
      bool sampled, std::size_t count, std::optional<std::pair<bool, std::size_t>> also = {}) {
    auto in = [&](std::uint64_t p, std::size_t n) {
      return topology::InZoneSample("dns lookups", p, kSampleSelf, pods_, n, env_.service_uid);
    };
    for (std::uint64_t p = 1000; p < 2000; ++p) {
      if (in(p, count) == sampled && (!also || in(p, also->second) == also->first)) {
        return std::chrono::system_clock::time_point{kPeriod * p + 1s};
      }
    }
    ADD_FAILURE() << "no such period";
    return {};
  }

  bool HasLookupSeries() {
    return FindSeries(metrics_.registry(), "podnet_dns_queries_per_lookup",
                      {{"name", "example.test"}, {"form", "as_written"}})
        .has_value();
  }
  double Sampled() {
    auto m = FindSeries(metrics_.registry(), "podnet_dns_lookup_sampled", {});
    return m ? m->gauge.value : -1;
  }
  double SentBytes() {
    return CounterValue(metrics_.registry(), "podnet_probe_sent_bytes_total", {{"probe", "dns"}});
  }

  std::vector<topology::Peer> pods_;
  std::chrono::system_clock::time_point now_;
};

TEST_F(DnsSampleTest, OnlyTheSampledPodsLookUpAndTheOthersKeepNoLookupSeries) {
  env_.probe_pods = pods_;
  env_.service_uid = "uid-1";
  auto kind = Kind(DnsSampleOptions{1, kPeriod});
  auto lookup = kind->ForTarget("example.test|as_written|glibc");
  auto servers = kind->ForTarget("|servers|");

  now_ = PeriodWhereSelf(true, 1);
  Round(*lookup);
  Round(*servers);
  EXPECT_TRUE(HasLookupSeries());
  EXPECT_EQ(Sampled(), 1);
  double sent = SentBytes();
  EXPECT_GT(sent, 0);

  // Another Pod of zone-a has the duty: no question, and the lookup's series go.
  now_ = PeriodWhereSelf(false, 1);
  Round(*lookup);
  Round(*servers);
  EXPECT_FALSE(HasLookupSeries());
  EXPECT_EQ(Sampled(), 0);
  EXPECT_LE(SentBytes(), sent);  // gone (-1) or, if another set holds it, not grown

  // Self's turn again: the lookup's series come back, from zero.
  now_ = PeriodWhereSelf(true, 1);
  Round(*lookup);
  EXPECT_TRUE(HasLookupSeries());
  EXPECT_EQ(CounterValue(metrics_.registry(), "podnet_dns_queries_total",
                         {{"name", "example.test"}, {"form", "as_written"}, {"qtype", "A"}}),
            1);
}

TEST_F(DnsSampleTest, OnlyTheReplicaSampleAsksTheReplicasEveryPodAsksResolvConf) {
  LoopbackDns replica(io_, {"example.test"});
  const std::string server = "127.0.0.1:" + std::to_string(replica.port());
  env_.dns_servers = {MakePeer("coredns-1", "127.0.0.1", "node-5", "zone-b", PathClass::kCrossZone,
                               replica.port())};
  env_.probe_pods = pods_;
  env_.service_uid = "uid-1";
  auto servers = Kind(DnsSampleOptions{1, kPeriod, 2})->ForTarget("|servers|");
  auto replica_series = [&] {
    return FindSeries(metrics_.registry(), "podnet_dns_server_rtt_seconds", {{"server", server}})
        .has_value();
  };

  // One of its zone's 2 that time the replicas, not the 1 that looks up: it asks the replica.
  now_ = PeriodWhereSelf(false, 1, std::pair{true, std::size_t{2}});
  Round(*servers);
  EXPECT_EQ(replica.questions, 1);
  EXPECT_TRUE(replica_series());
  EXPECT_EQ(Sampled(), 0);

  // Outside both: the replica is not asked and its series goes; resolv.conf's nameserver
  // (127.0.0.1:53, where nothing answers) is still asked, and counted as silent again.
  auto silent = [&] {
    return CounterValue(metrics_.registry(), "podnet_probe_errors_total",
                        {{"probe", "dns"}, {"reason", "server_no_answer"}});
  };
  double before = silent();
  EXPECT_GE(before, 1);
  now_ = PeriodWhereSelf(false, 2);
  Round(*servers);
  EXPECT_EQ(replica.questions, 1);
  EXPECT_FALSE(replica_series());
  EXPECT_EQ(silent(), before + 1);

  // The lookup Pods are among the replica Pods (one draw): in the 1, so in the 2.
  now_ = PeriodWhereSelf(true, 1);
  Round(*servers);
  EXPECT_EQ(replica.questions, 2);
  EXPECT_EQ(Sampled(), 1);
}

TEST_F(DnsSampleTest, APodNotListedYetDoesNotLookUp) {
  env_.probe_pods = std::vector<topology::Peer>{pods_.begin() + 1, pods_.end()};  // not self
  auto lookup = Kind(DnsSampleOptions{4, kPeriod})->ForTarget("example.test|as_written|glibc");
  now_ = PeriodWhereSelf(true, 4);
  Round(*lookup);
  EXPECT_FALSE(HasLookupSeries());
}

TEST_F(DnsSampleTest, WithoutASampleOrWithoutDiscoveryEveryPodLooksUp) {
  now_ = PeriodWhereSelf(false, 1);
  env_.probe_pods = pods_;
  auto unsampled = Kind(std::nullopt);
  auto lookup = unsampled->ForTarget("example.test|as_written|glibc");
  Round(*lookup);
  EXPECT_TRUE(HasLookupSeries());
  lookup->RemoveSeries();

  env_.probe_pods.reset();  // static peers: no Pods to draw from
  auto servers = Kind(DnsSampleOptions{1, kPeriod})->ForTarget("|servers|");
  lookup = Kind(DnsSampleOptions{1, kPeriod})->ForTarget("example.test|as_written|glibc");
  Round(*lookup);
  Round(*servers);
  EXPECT_TRUE(HasLookupSeries());
  EXPECT_EQ(Sampled(), 1);
}

}  // namespace
}  // namespace podnet::probes::dns
