// DNS discovery (discovery/kubernetes/dns_discovery.h): the identity bookkeeping on its own, the
// answer parser on real DNS messages, and the whole thing over loopback: a DNS server (UDP and
// TCP) answering the Service's name, real UDP echo responders identifying themselves, the stand-in
// API server for the Node and the Service.

#include "exporter/discovery/kubernetes/dns_discovery.h"

#include <gtest/gtest.h>

#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "exporter/probes/dns/answer.h"
#include "exporter/responders/udp_echo.h"
#include "tests/unit/discovery/fake_api_server.h"
#include "tests/unit/testing/loop.h"

namespace podnet::discovery::kubernetes {
namespace {

using namespace std::chrono_literals;
using boost::asio::ip::address;
using boost::asio::ip::make_address;
using podnet::testing::CounterValue;
using podnet::testing::Eventually;
using podnet::testing::FakeApiServer;
using podnet::testing::FakeRequest;
using podnet::testing::FakeResponse;
using podnet::testing::LoopThread;
using podnet::testing::TempDir;
using TimePoint = PeerIdentities::TimePoint;

Endpoint Who(const std::string& pod, const std::string& ip, const std::string& node,
             const std::string& zone) {
  Endpoint e;
  e.name = pod;
  e.address = make_address(ip);
  e.node = node;
  e.zone = zone;
  return e;
}

std::vector<address> Addrs(std::initializer_list<const char*> ips) {
  std::vector<address> out;
  for (const char* ip : ips) out.push_back(make_address(ip));
  return out;
}

PeerIdentities::Options Quick() {
  PeerIdentities::Options o;
  o.absent_grace = 90s;
  o.reask = 600s;
  o.ask_timeout = 2s;
  o.max_addresses = 4;
  return o;
}

// ---------------------------------------------------------------------------------------------
// PeerIdentities

TEST(PeerIdentitiesTest, NewAddressesAreAskedOnceAndIdentifiedOnesBecomeEndpoints) {
  PeerIdentities ids(Quick());
  TimePoint t0{};
  EXPECT_EQ(ids.Answered(Addrs({"10.0.0.2", "10.0.0.1", "10.0.0.2"}), t0), 0u);
  EXPECT_EQ(ids.size(), 2u);  // the duplicate counts once
  EXPECT_FALSE(ids.AllAskedOnce());
  auto due = ids.Due(t0, 1);
  ASSERT_EQ(due.size(), 1u);  // at most `max`
  auto rest = ids.Due(t0, 10);
  ASSERT_EQ(rest.size(), 1u);  // the first one is in flight, not due again
  EXPECT_TRUE(ids.Due(t0, 10).empty());
  EXPECT_EQ(ids.Heard(make_address("10.0.0.1"), Who("p1", "10.0.0.1", "n1", "z1"), t0 + 1s),
            PeerIdentities::HeardResult::kChanged);
  EXPECT_FALSE(ids.AllAskedOnce());
  EXPECT_EQ(ids.Heard(make_address("10.0.0.2"), Who("p2", "10.0.0.2", "n2", "z2"), t0 + 1s),
            PeerIdentities::HeardResult::kChanged);
  EXPECT_TRUE(ids.AllAskedOnce());
  auto eps = ids.Endpoints();
  ASSERT_EQ(eps.size(), 2u);
  EXPECT_EQ(eps[0].name, "p1");
  EXPECT_EQ(eps[1].zone, "z2");
  // A reply nobody asked for (a replay, or a stray) changes nothing.
  EXPECT_EQ(ids.Heard(make_address("10.0.0.1"), Who("evil", "10.0.0.1", "n9", "z9"), t0 + 2s),
            PeerIdentities::HeardResult::kIgnored);
  EXPECT_EQ(ids.Heard(make_address("10.0.0.7"), Who("p7", "10.0.0.7", "n7", "z7"), t0 + 2s),
            PeerIdentities::HeardResult::kIgnored);
  EXPECT_EQ(ids.Endpoints()[0].name, "p1");
  // Asked again after `reask`; the same answer is no change.
  EXPECT_TRUE(ids.Due(t0 + 599s, 10).empty());
  ASSERT_EQ(ids.Due(t0 + 601s, 10).size(), 2u);
  EXPECT_EQ(ids.Heard(make_address("10.0.0.1"), Who("p1", "10.0.0.1", "n1", "z1"), t0 + 602s),
            PeerIdentities::HeardResult::kSame);
}

TEST(PeerIdentitiesTest, UnansweredAsksBackOffAndKeepTheLastIdentity) {
  PeerIdentities ids(Quick());
  TimePoint t0{};
  ids.Answered(Addrs({"10.0.0.1"}), t0);
  ASSERT_EQ(ids.Due(t0, 10).size(), 1u);
  EXPECT_EQ(ids.Expire(t0 + 1s), 0u);  // not yet late
  EXPECT_EQ(ids.Expire(t0 + 2s), 1u);
  EXPECT_TRUE(ids.AllAskedOnce());  // timed out counts as asked: readiness does not wait on it
  EXPECT_TRUE(ids.Endpoints().empty());
  // Retries after 2 s, then 4 s, 8 s ...: the next one not before 2 s after the loss.
  EXPECT_TRUE(ids.Due(t0 + 3s, 10).empty());
  ASSERT_EQ(ids.Due(t0 + 4s, 10).size(), 1u);
  EXPECT_EQ(ids.Expire(t0 + 6s), 1u);
  EXPECT_TRUE(ids.Due(t0 + 9s, 10).empty());
  ASSERT_EQ(ids.Due(t0 + 10s, 10).size(), 1u);
  EXPECT_EQ(ids.Heard(make_address("10.0.0.1"), Who("p1", "10.0.0.1", "n1", "z1"), t0 + 11s),
            PeerIdentities::HeardResult::kChanged);
  // Later asks go unanswered (a busy Pod): the identity stays.
  ASSERT_EQ(ids.Due(t0 + 700s, 10).size(), 1u);
  ids.Expire(t0 + 710s);
  ASSERT_EQ(ids.Endpoints().size(), 1u);
  // A reply without a usable record is a loss too, and only while asked.
  ASSERT_EQ(ids.Due(t0 + 720s, 10).size(), 1u);
  EXPECT_TRUE(ids.Lost(make_address("10.0.0.1"), t0 + 720s));
  EXPECT_FALSE(ids.Lost(make_address("10.0.0.1"), t0 + 720s));
}

TEST(PeerIdentitiesTest, AnIdentityWithoutAZoneIsAskedAgainSoon) {
  // A Pod answers before its Node GET gave it its zone (the lab saw this on every start).
  PeerIdentities ids(Quick());
  TimePoint t0{};
  ids.Answered(Addrs({"10.0.0.1"}), t0);
  ids.Due(t0, 10);
  EXPECT_EQ(ids.Heard(make_address("10.0.0.1"), Who("p1", "10.0.0.1", "n1", ""), t0),
            PeerIdentities::HeardResult::kChanged);
  EXPECT_TRUE(ids.Due(t0 + 1s, 10).empty());
  ASSERT_EQ(ids.Due(t0 + 2s, 10).size(), 1u);  // the lost ask's backoff, not 10 minutes
  EXPECT_EQ(ids.Heard(make_address("10.0.0.1"), Who("p1", "10.0.0.1", "n1", "z1"), t0 + 2s),
            PeerIdentities::HeardResult::kChanged);
  EXPECT_EQ(ids.Endpoints()[0].zone, "z1");
  EXPECT_TRUE(ids.Due(t0 + 599s, 10).empty());
}

TEST(PeerIdentitiesTest, AbsentAddressesStayForTheGraceAndComeBackAskedAgain) {
  PeerIdentities ids(Quick());
  TimePoint t0{};
  ids.Answered(Addrs({"10.0.0.1", "10.0.0.2"}), t0);
  ids.Due(t0, 10);
  ids.Heard(make_address("10.0.0.1"), Who("p1", "10.0.0.1", "n1", "z1"), t0);
  ids.Heard(make_address("10.0.0.2"), Who("p2", "10.0.0.2", "n2", "z2"), t0);
  // An NXDOMAIN mid-rollout: nobody leaves yet.
  ids.Answered({}, t0 + 30s);
  EXPECT_EQ(ids.Endpoints().size(), 2u);
  // 10.0.0.1 comes back: asked again at once (the IP may now be another Pod's).
  ids.Answered(Addrs({"10.0.0.1"}), t0 + 60s);
  auto due = ids.Due(t0 + 60s, 10);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0], make_address("10.0.0.1"));
  EXPECT_EQ(ids.Heard(due[0], Who("q1", "10.0.0.1", "n1", "z1"), t0 + 61s),
            PeerIdentities::HeardResult::kChanged);
  // An answer with records and without 10.0.0.2: it went unready or away, and leaves at once.
  auto eps = ids.Endpoints();
  ASSERT_EQ(eps.size(), 1u);
  EXPECT_EQ(eps[0].name, "q1");
  // Empty answers for longer than the grace: the last one goes too.
  ids.Answered({}, t0 + 100s);
  EXPECT_EQ(ids.size(), 1u);
  ids.Answered({}, t0 + 189s);
  EXPECT_EQ(ids.size(), 1u);
  ids.Answered({}, t0 + 190s);
  EXPECT_EQ(ids.size(), 0u);
}

TEST(PeerIdentitiesTest, SeededPeersAreKeptThroughAnEmptyFirstAnswerAndNotAskedAgainAtOnce) {
  // A restarted discovery of the same Service starts from the last one's peers.
  PeerIdentities ids(Quick());
  TimePoint t0{};
  ids.Seed({Who("p1", "10.0.0.1", "n1", "z1"), Who("p2", "10.0.0.2", "n2", "z2")}, t0);
  EXPECT_EQ(ids.Endpoints().size(), 2u);
  EXPECT_TRUE(ids.Due(t0 + 1s, 10).empty()) << "known: asked again only after reask";
  // The first answer is an NXDOMAIN (every Pod out of the records for a moment): kept.
  ids.Answered({}, t0 + 1s);
  EXPECT_TRUE(ids.AllAskedOnce());
  EXPECT_EQ(ids.Endpoints().size(), 2u);
  // An answer with records leaves out 10.0.0.2: it goes at once. 10.0.0.3 is new; 10.0.0.1 is
  // back after missing from an answer: both asked, as for any address.
  ids.Answered(Addrs({"10.0.0.1", "10.0.0.3"}), t0 + 2s);
  auto eps = ids.Endpoints();
  ASSERT_EQ(eps.size(), 1u);
  EXPECT_EQ(eps[0].name, "p1");
  EXPECT_EQ(ids.Due(t0 + 2s, 10), Addrs({"10.0.0.1", "10.0.0.3"}));
  // Within the cap (4 here); an address already known is left as it is.
  ids.Seed({Who("x1", "10.0.0.1", "nx", "zx"), Who("p5", "10.0.0.5", "n5", "z5"),
            Who("p6", "10.0.0.6", "n6", "z6"), Who("p7", "10.0.0.7", "n7", "z7")},
           t0 + 602s);
  EXPECT_EQ(ids.size(), 4u);
  bool p1_kept = false;
  for (const auto& e : ids.Endpoints()) p1_kept |= e.name == "p1";
  EXPECT_TRUE(p1_kept);
}

TEST(PeerIdentitiesTest, AFloodOfRecordsIsCutAndTwoClaimsOfOneNodeAreCounted) {
  PeerIdentities ids(Quick());  // max_addresses 4
  TimePoint t0{};
  EXPECT_EQ(
      ids.Answered(Addrs({"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"}),
                   t0),
      2u);
  EXPECT_EQ(ids.size(), 4u);
  for (const address& a : ids.Due(t0, 10)) {
    // Two addresses say they are on node n1 (a liar, or a surge's second Pod).
    std::string n = a == make_address("10.0.0.2") ? "n1" : "n" + a.to_string().substr(7);
    ids.Heard(a, Who("p" + a.to_string().substr(7), a.to_string(), n, "z"), t0);
  }
  EXPECT_EQ(ids.NodeConflicts(), 1u);
  EXPECT_EQ(ids.Endpoints().size(), 4u);
}

// ---------------------------------------------------------------------------------------------
// AnswerAddresses on whole DNS messages (probes::dns::MakeAnswer: 10.0.x.y, fd00::x:y).

TEST(AnswerAddressesTest, ReadsEveryRecordUpToTheCap) {
  std::string a = probes::dns::MakeAnswer("podnet.podnet.svc.cluster.local", 1, 0, 300);
  bool more = true;
  auto got = AnswerAddresses(reinterpret_cast<const unsigned char*>(a.data()),
                             static_cast<int>(a.size()), false, 1000, &more);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->size(), 300u);
  EXPECT_FALSE(more);
  EXPECT_EQ(got->front(), make_address("10.0.0.0"));  // MakeAnswer counts from 10.0.0.0
  got = AnswerAddresses(reinterpret_cast<const unsigned char*>(a.data()),
                        static_cast<int>(a.size()), false, 100, &more);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->size(), 100u);
  EXPECT_TRUE(more);
  std::string aaaa = probes::dns::MakeAnswer("podnet.podnet.svc.cluster.local", 28, 0, 2);
  got = AnswerAddresses(reinterpret_cast<const unsigned char*>(aaaa.data()),
                        static_cast<int>(aaaa.size()), true, 10, &more);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->size(), 2u);
  EXPECT_TRUE(got->front().is_v6());
  // An IPv4-mapped AAAA record is the IPv4 address: the one a responder can be asked at.
  std::string mapped = aaaa;
  const std::string first_record = std::string("\xfd\x00", 2) + std::string(14, '\0');
  auto at = mapped.find(first_record);
  ASSERT_NE(at, std::string::npos);
  mapped.replace(at, 16, std::string(10, '\0') + std::string("\xff\xff\x0a\x00\x00\x05", 6));
  got = AnswerAddresses(reinterpret_cast<const unsigned char*>(mapped.data()),
                        static_cast<int>(mapped.size()), true, 10, &more);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ(got->front(), make_address("10.0.0.5"));
  EXPECT_TRUE(got->back().is_v6());
  // No record of the type: none, not a failure. A message cut short: a failure.
  std::string none = probes::dns::MakeAnswer("podnet.podnet.svc.cluster.local", 1, 0, 0);
  got = AnswerAddresses(reinterpret_cast<const unsigned char*>(none.data()),
                        static_cast<int>(none.size()), false, 10, &more);
  ASSERT_TRUE(got);
  EXPECT_TRUE(got->empty());
  EXPECT_FALSE(
      AnswerAddresses(reinterpret_cast<const unsigned char*>(a.data()), 40, false, 10, &more));
}

// ---------------------------------------------------------------------------------------------
// The whole discovery over loopback.

// The Service's name on 127.0.0.1, UDP and TCP on one port: A records of `addresses` (NODATA
// for AAAA), NXDOMAIN while `nxdomain`; a UDP answer over `udp_max` records is sent truncated
// (TC, no records) as a real server does past its UDP size, and the whole over TCP.
class RecordsServer {
 public:
  explicit RecordsServer(boost::asio::io_context& io) : udp_(io), tcp_(io) {
    using boost::asio::ip::tcp;
    using boost::asio::ip::udp;
    for (int i = 0; i < 50 && !tcp_.is_open(); ++i) {
      udp_ = udp::socket(io, udp::endpoint(make_address("127.0.0.1"), 0));
      boost::system::error_code ec;
      tcp_.open(tcp::v4());
      tcp_.set_option(tcp::acceptor::reuse_address(true));
      tcp_.bind(tcp::endpoint(make_address("127.0.0.1"), udp_.local_endpoint().port()), ec);
      if (ec) {
        tcp_.close();
        continue;
      }
      tcp_.listen();
    }
    ReceiveUdp();
    Accept();
  }
  std::uint16_t port() const { return udp_.local_endpoint().port(); }

  std::mutex mu;
  std::vector<std::string> addresses;
  bool nxdomain = false;
  std::size_t udp_max = 20;
  int udp_questions = 0, tcp_questions = 0;

 private:
  std::string Reply(const std::uint8_t* q, std::size_t n, bool over_tcp) {
    std::lock_guard lock(mu);
    std::size_t i = 12;
    while (i < n && q[i] != 0) i += 1 + q[i];
    std::size_t qend = i + 5;
    if (qend > n) return "";
    std::uint16_t qtype = static_cast<std::uint16_t>((q[i + 1] << 8) | q[i + 2]);
    std::string out(reinterpret_cast<const char*>(q), qend);
    std::size_t records = qtype == 1 && !nxdomain ? addresses.size() : 0;
    bool truncated = !over_tcp && records > udp_max;
    if (truncated) records = 0;
    out[2] = static_cast<char>(0x81 | (truncated ? 0x02 : 0));
    out[3] = static_cast<char>(0x80 | (nxdomain ? 3 : 0));
    out[6] = static_cast<char>(records >> 8);
    out[7] = static_cast<char>(records & 0xFF);
    out[8] = out[9] = out[10] = out[11] = 0;
    for (std::size_t r = 0; r < records; ++r) {
      auto b = make_address(addresses[r]).to_v4().to_bytes();
      const char rr[] = {'\xC0', '\x0C', 0, 1, 0, 1, 0, 0, 0, 30, 0, 4};
      out.append(rr, sizeof rr);
      out.append(reinterpret_cast<const char*>(b.data()), 4);
    }
    return out;
  }
  void ReceiveUdp() {
    udp_.async_receive_from(boost::asio::buffer(buf_), from_,
                            [this](boost::system::error_code ec, std::size_t n) {
                              if (ec) return;
                              {
                                std::lock_guard lock(mu);
                                ++udp_questions;
                              }
                              std::string r = Reply(buf_.data(), n, false);
                              if (!r.empty()) udp_.send_to(boost::asio::buffer(r), from_);
                              ReceiveUdp();
                            });
  }
  void Accept() {
    tcp_.async_accept([this](boost::system::error_code ec, boost::asio::ip::tcp::socket s) {
      if (ec) return;
      // One question per connection, read and answered in place (the test's loop is its own).
      std::array<std::uint8_t, 2> len{};
      boost::system::error_code e;
      boost::asio::read(s, boost::asio::buffer(len), e);
      std::vector<std::uint8_t> q(static_cast<std::size_t>((len[0] << 8) | len[1]));
      if (!e) boost::asio::read(s, boost::asio::buffer(q), e);
      if (!e) {
        {
          std::lock_guard lock(mu);
          ++tcp_questions;
        }
        std::string r = Reply(q.data(), q.size(), true);
        std::string framed{static_cast<char>(r.size() >> 8), static_cast<char>(r.size() & 0xFF)};
        boost::asio::write(s, boost::asio::buffer(framed + r), e);
      }
      Accept();
    });
  }
  boost::asio::ip::udp::socket udp_;
  boost::asio::ip::tcp::acceptor tcp_;
  std::array<std::uint8_t, 4096> buf_{};
  boost::asio::ip::udp::endpoint from_;
};

constexpr char kNode[] = R"({"kind":"Node","apiVersion":"v1","metadata":{"name":"node-a",
  "labels":{"topology.kubernetes.io/zone":"zone-a"}}})";
constexpr char kService[] = R"({"kind":"Service","apiVersion":"v1","metadata":{"name":"podnet",
  "namespace":"podnet","uid":"2f1e7c52-9b7a-4d0e-8c31-5a6b7c8d9e0f"},
  "spec":{"clusterIP":"None"}})";

class DnsDiscoveryTest : public ::testing::Test {
 protected:
  DnsDiscoveryTest() : metrics_(registry_), dns_metrics_(registry_) {
    sa_.Write("token", "token-1\n");
    api_ = std::make_unique<FakeApiServer>([](const FakeRequest& r) -> FakeResponse {
      if (r.target == "/api/v1/nodes/node-a") return {200, {}, kNode};
      if (r.target == "/api/v1/namespaces/podnet/services/podnet") return {200, {}, kService};
      return {404, {}, R"({"kind":"Status","apiVersion":"v1","status":"Failure","code":404})"};
    });
    // On a loop of its own: its TCP side reads and answers in place, which would block the
    // discovery's c-ares on one loop.
    dns_loop_.Run([&] {
      records_ = std::make_unique<RecordsServer>(dns_loop_.io());
      return 0;
    });
  }
  ~DnsDiscoveryTest() override {
    loop_.Run([&] {
      discovery_.reset();
      responders_.clear();
      return 0;
    });
    loop_.Stop();
    dns_loop_.Run([&] {
      records_.reset();
      return 0;
    });
    dns_loop_.Stop();
    api_.reset();
  }

  // Echo responders on 127.0.0.2.. with one port, each saying (node-i, zone, pod-i).
  void Responders(int n, const std::vector<std::string>& zones) {
    loop_.Run([&] {
      for (int i = 0; i < n; ++i) {
        std::string ip = "127.0.0." + std::to_string(i + 2);
        net::HostPort at{make_address(ip), port_};
        responders_.push_back(
            std::make_unique<responders::UdpEchoResponder>(loop_.io(), at, echo_registry_));
        if (port_ == 0) port_ = responders_.back()->port();
        responders_.back()->SetIdentity("node-" + std::to_string(i), zones[i % zones.size()],
                                        "podnet-" + std::to_string(i));
        std::lock_guard lock(records_->mu);
        records_->addresses.push_back(ip);
      }
      return 0;
    });
  }

  void Start() {
    loop_.Run([&] {
      std::string err;
      auto client = ApiClient::Create(
          loop_.io(), podnet::testing::FakeApiConfig(api_->port(), sa_.path() + "/token"), {},
          &err);
      DnsDiscoveryOptions o;
      o.name = "podnet.podnet.svc.cluster.local";
      o.nameserver = make_address("127.0.0.1");
      o.nameserver_port = records_->port();
      o.port = port_;
      o.refresh = 200ms;
      o.query_timeout = 2000ms;
      o.namespace_name = "podnet";
      o.service = "podnet";
      o.node = "node-a";
      o.want_zone = true;
      o.initial_backoff = 20ms;
      o.min_publish_interval = 0ms;
      o.identities.ask_timeout = 300ms;
      o.identities.absent_grace = 1000ms;
      discovery_ = std::make_unique<DnsDiscovery>(loop_.io(), std::move(client), o, metrics_,
                                                  dns_metrics_, [this](const Snapshot& s) {
                                                    std::lock_guard lock(mu_);
                                                    last_ = s;
                                                    ++published_;
                                                  });
      discovery_->Start();
      return 0;
    });
  }

  Snapshot Last() {
    std::lock_guard lock(mu_);
    return last_;
  }
  double Queries(const std::string& result) {
    return CounterValue(registry_, "podnet_discovery_dns_queries_total", {{"result", result}});
  }
  double Asks(const std::string& result) {
    return CounterValue(registry_, "podnet_discovery_identity_asks_total", {{"result", result}});
  }

  TempDir sa_;
  prometheus::Registry registry_, echo_registry_;
  DiscoveryMetrics metrics_;
  DnsDiscoveryMetrics dns_metrics_;
  std::unique_ptr<FakeApiServer> api_;
  LoopThread loop_, dns_loop_;
  std::unique_ptr<RecordsServer> records_;
  std::vector<std::unique_ptr<responders::UdpEchoResponder>> responders_;
  std::uint16_t port_ = 0;
  std::unique_ptr<DnsDiscovery> discovery_;
  std::mutex mu_;
  Snapshot last_;
  int published_ = 0;
};

TEST_F(DnsDiscoveryTest, RecordsOverTcpIdentitiesZoneAndServiceUid) {
  Responders(30, {"zone-a", "zone-b", "zone-c"});  // 30 records: truncated over UDP
  Start();
  ASSERT_TRUE(Eventually(
      [&] {
        auto s = Last();
        return s.synced && s.endpoints.size() == 30 && s.self_zone == "zone-a" &&
               !s.service_uid.empty();
      },
      10s));
  Snapshot s = Last();
  EXPECT_EQ(s.service_uid, "2f1e7c52-9b7a-4d0e-8c31-5a6b7c8d9e0f");
  const Endpoint* e7 = nullptr;
  for (const auto& e : s.endpoints) {
    if (e.address == make_address("127.0.0.9")) e7 = &e;
  }
  ASSERT_NE(e7, nullptr);
  EXPECT_EQ(e7->name, "podnet-7");
  EXPECT_EQ(e7->node, "node-7");
  EXPECT_EQ(e7->zone, "zone-b");
  EXPECT_GE(Queries("truncated"), 1);
  EXPECT_GE(Queries("ok"), 1);
  EXPECT_GE(Asks("answered"), 30);
  EXPECT_EQ(
      CounterValue(registry_, "podnet_discovery_identity_asks_total", {{"result", "timeout"}}), -1);
  EXPECT_TRUE(discovery_->synced());
}

TEST_F(DnsDiscoveryTest, AnAnswerOver512BytesWithoutTruncationIsReadWhole) {
  // 40 records, 689 bytes over UDP (EDNS0 asked for 1,200): CoreDNS sends them without TC. The
  // helper that tried this as a user found c-ares's 512-byte cut made every such answer fail.
  {
    std::lock_guard lock(records_->mu);
    records_->udp_max = 70;
  }
  Responders(40, {"zone-a", "zone-b"});
  Start();
  ASSERT_TRUE(Eventually([&] { return Last().synced && Last().endpoints.size() == 40; }, 10s));
  EXPECT_EQ(Queries("truncated"), -1);
  EXPECT_EQ(Queries("error"), -1);
  std::lock_guard lock(records_->mu);
  EXPECT_EQ(records_->tcp_questions, 0);
}

TEST_F(DnsDiscoveryTest, NxdomainFirstIsSyncedAndEmptyThenPodsArriveAndLeaveAfterTheGrace) {
  {
    std::lock_guard lock(records_->mu);
    records_->nxdomain = true;
  }
  Responders(3, {"zone-a"});  // listening, not yet in the answers
  Start();
  ASSERT_TRUE(Eventually([&] { return Last().synced; }, 5s));
  EXPECT_TRUE(Last().endpoints.empty());
  EXPECT_GE(Queries("nxdomain"), 1);
  {
    std::lock_guard lock(records_->mu);
    records_->nxdomain = false;
  }
  ASSERT_TRUE(Eventually([&] { return Last().endpoints.size() == 3; }, 5s));
  // An NXDOMAIN mid-rollout keeps them for the grace (1 s here), then they go.
  {
    std::lock_guard lock(records_->mu);
    records_->nxdomain = true;
  }
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(Last().endpoints.size(), 3u);
  ASSERT_TRUE(Eventually([&] { return Last().endpoints.empty(); }, 5s));
}

TEST_F(DnsDiscoveryTest, AnAddressThatDoesNotIdentifyItselfIsRetriedNeverListed) {
  Responders(2, {"zone-a"});
  {
    std::lock_guard lock(records_->mu);
    records_->addresses.push_back("127.0.0.50");  // nothing listens there
  }
  Start();
  ASSERT_TRUE(Eventually([&] { return Last().synced && Last().endpoints.size() == 2; }, 5s));
  ASSERT_TRUE(Eventually([&] { return Asks("timeout") >= 2; }, 5s));  // 300 ms, then 600 ms
  EXPECT_EQ(Last().endpoints.size(), 2u);
}

}  // namespace
}  // namespace podnet::discovery::kubernetes
