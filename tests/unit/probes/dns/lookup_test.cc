// The lookup driver end to end on loopback: a resolver model, c-ares on Boost.Asio, and an
// in-process DNS server on 127.0.0.1:0 (the Envoy/c-ares way of testing a resolver).
#include "exporter/probes/dns/lookup.h"

#include <gtest/gtest.h>

#include "tests/unit/probes/dns/run_lookup.h"
#include "tests/unit/testing/loop.h"
#include "tests/unit/testing/loopback_dns.h"

namespace podnet::probes::dns {
namespace {

using boost::asio::ip::udp;
using podnet::testing::LoopbackDns;
using podnet::testing::TimeScale;

ResolvConf Conf(std::uint16_t port, const std::string& text) {
  ResolvConf c = ParseResolvConf(text, Libc::kGlibc, {});
  c.nameservers = {{boost::asio::ip::make_address("127.0.0.1"), port}};
  return c;
}

TEST(LookupTest, SearchWalkOnTheWire) {
  boost::asio::io_context io;
  LoopbackDns dns(io, {"web.b.test"});
  auto conf = Conf(dns.port(), "search a.test b.test\n");
  for (Libc libc : {Libc::kGlibc, Libc::kMusl}) {
    int before = dns.questions;
    LookupOutcome o = RunLookup(io, conf, libc, "web");
    EXPECT_EQ(o.result, Result::kSuccess) << LibcName(libc);
    ASSERT_EQ(o.queries.size(), 4u) << LibcName(libc);
    EXPECT_EQ(dns.questions - before, 4) << LibcName(libc);
    EXPECT_EQ(o.queries[0].query.name, "web.a.test");
    EXPECT_EQ(o.queries[0].reply->rcode, kNxDomain);
    EXPECT_EQ(o.queries[3].query.name, "web.b.test");
    EXPECT_EQ(o.queries[3].reply->ancount, 1);
    EXPECT_GT(o.queries[3].reply_bytes, o.queries[3].bytes);
    EXPECT_GT(o.duration.count(), 0);
  }
}

TEST(LookupTest, SilentServerIsBoundedByTheModel) {
  boost::asio::io_context io;
  LoopbackDns dns(io, {}, /*drop=*/true);
  auto conf = Conf(dns.port(), "options timeout:1 attempts:1\n");
  auto t0 = std::chrono::steady_clock::now();
  LookupOutcome o = RunLookup(io, conf, Libc::kMusl, "silent.example.");
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(o.result, Result::kTimeout);
  EXPECT_EQ(o.queries.size(), 2u);
  EXPECT_FALSE(o.queries[0].reply.has_value());
  // No sooner than the model's timeout (1 s x 1 attempt, minus slack); at most 5x it (5 s, x
  // PODNET_TEST_TIME_SCALE) so a busy neighbour cannot fail it, while a lookup that never ends
  // still does.
  EXPECT_GE(took, std::chrono::milliseconds(950));
  EXPECT_LT(took, std::chrono::milliseconds(5000) * TimeScale());
}

// A port on 127.0.0.1 nothing listens on (bound, then closed): ICMP port unreachable.
std::uint16_t ClosedPort(boost::asio::io_context& io) {
  udp::socket s(io, udp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  return s.local_endpoint().port();
}

// Only what left the socket is counted, in the order it did. Real glibc 2.36 (lab_dns_truth,
// case fid-refused) sends A and AAAA to a refusing first server (one sendmmsg), then both to
// the second: 4 questions; musl (unconnected socket, no ICMP errors) asks both servers at once:
// 4. Every row's answer comes after its question.
TEST(LookupTest, RefusingServerCountsWhatLeftTheSocket) {
  boost::asio::io_context io;
  LoopbackDns dns(io, {});
  for (Libc libc : {Libc::kGlibc, Libc::kMusl}) {
    ResolvConf conf = ParseResolvConf("options timeout:2 attempts:1\n", libc, {});
    conf.nameservers = {{boost::asio::ip::make_address("127.0.0.1"), ClosedPort(io)},
                        {boost::asio::ip::make_address("127.0.0.1"), dns.port()}};
    int before = dns.questions;
    LookupOutcome o = RunLookup(io, conf, libc, "web.a.test.");
    EXPECT_EQ(o.result, Result::kNxDomain) << LibcName(libc);
    ASSERT_EQ(o.queries.size(), 4u) << LibcName(libc);
    EXPECT_EQ(dns.questions - before, 2) << LibcName(libc);
    int a = 0, aaaa = 0;
    for (std::size_t i = 0; i < o.queries.size(); ++i) {
      const QueryRecord& q = o.queries[i];
      EXPECT_TRUE(q.on_wire);
      (q.query.qtype == QType::kA ? a : aaaa)++;
      if (i > 0) {
        EXPECT_GE(q.sent_at, o.queries[i - 1].sent_at);
      }
      if (q.reply) {
        EXPECT_GE(q.replied_at, q.sent_at);
      }
    }
    EXPECT_EQ(a, 2) << LibcName(libc);
    EXPECT_EQ(aaaa, 2) << LibcName(libc);
    if (libc == Libc::kGlibc) {
      // Both refusals are on record (c-ares ends every question to the refusing server).
      EXPECT_EQ(o.queries[0].reply->kind, Reply::Kind::kConnRefused);
      EXPECT_EQ(o.queries[1].reply->kind, Reply::Kind::kConnRefused);
    }
  }
}

// use-vc to a server that refuses the TCP connection: nothing is written, so nothing is counted
// (real glibc, lab case fid-refused-vc: 0 questions to it); the two questions the walk asked
// for are reported apart.
TEST(LookupTest, RefusedTcpConnectionSendsNothing) {
  boost::asio::io_context io;
  ResolvConf conf = ParseResolvConf("options use-vc timeout:1 attempts:1\n", Libc::kGlibc, {});
  conf.nameservers = {{boost::asio::ip::make_address("127.0.0.1"), ClosedPort(io)}};
  LookupOutcome o = RunLookup(io, conf, Libc::kGlibc, "web.a.test.");
  EXPECT_EQ(o.result, Result::kError);
  EXPECT_TRUE(o.queries.empty());
  EXPECT_EQ(o.not_sent, 2);
}

// Which replies each libc reads (issue 28). glibc's connected socket hears only its server's
// port, and send_dg matches ID and question section (__libc_res_queriesmatch); musl's
// res_msend.c reads from any nameserver address and port, matching the ID alone. Real musl 1.2.3
// and glibc 2.36 with the stray-port decoy: the answer after 151 ms (lab_dns_truth fid-stray).
TEST(LookupTest, RepliesEachLibcReads) {
  boost::asio::io_context io;
  for (bool stray_port : {true, false}) {
    LoopbackDns dns(
        io, {"web.a.test"}, false,
        stray_port ? podnet::testing::Decoy::kStrayPort : podnet::testing::Decoy::kOtherQuestion);
    for (Libc libc : {Libc::kGlibc, Libc::kMusl}) {
      ResolvConf conf = ParseResolvConf("options timeout:2 attempts:1\n", libc, {});
      conf.nameservers = {{boost::asio::ip::make_address("127.0.0.1"), dns.port()}};
      LookupOutcome o = RunLookup(io, conf, libc, "web.a.test.");
      std::string what = std::string(LibcName(libc)) + (stray_port ? " stray port" : " question");
      EXPECT_EQ(o.queries.size(), 2u) << what;
      // The decoy is read only by musl, and only when it comes from the server's port.
      bool decoy_read = libc == Libc::kMusl && !stray_port;
      EXPECT_EQ(o.result, decoy_read ? Result::kNxDomain : Result::kSuccess) << what;
      if (decoy_read) {
        EXPECT_LT(o.duration, std::chrono::milliseconds(100)) << what;
      } else {
        EXPECT_GE(o.duration, std::chrono::milliseconds(95)) << what;
      }
    }
  }
}

// A and AAAA outstanding on one socket, answered AAAA first: both are read at once, each
// paired with its own question through the wire-ID mapping.
TEST(LookupTest, PairAnsweredOutOfOrder) {
  boost::asio::io_context io;
  LoopbackDns dns(io, {"web.a.test"}, false, podnet::testing::Decoy::kReversed);
  ResolvConf conf = ParseResolvConf("options timeout:2 attempts:1\n", Libc::kGlibc, {});
  conf.nameservers = {{boost::asio::ip::make_address("127.0.0.1"), dns.port()}};
  LookupOutcome o = RunLookup(io, conf, Libc::kGlibc, "web.a.test.");
  EXPECT_EQ(o.result, Result::kSuccess);
  ASSERT_EQ(o.queries.size(), 2u);
  EXPECT_TRUE(o.queries[0].reply.has_value());
  EXPECT_TRUE(o.queries[1].reply.has_value());
  EXPECT_LT(o.duration, std::chrono::milliseconds(1000));
}

}  // namespace
}  // namespace podnet::probes::dns
