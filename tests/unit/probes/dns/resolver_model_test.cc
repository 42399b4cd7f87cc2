// The resolver models against a scripted zone: every row of the issue's reference, both
// resolvers, ndots 1 and 5, and the rcode-driven stops. The lab test checks the same rows
// against real glibc and musl on the wire.
#include "exporter/probes/dns/resolver_model.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>

namespace podnet::probes::dns {
namespace {

const char* kSearch =
    "search podnet.svc.cluster.local svc.cluster.local cluster.local "
    "ap-northeast-2.compute.internal\n";

// What a nameserver does with one question.
// kLoseFirstAaaa: the zone, but the first AAAA question of each name goes unanswered;
// kLoseAaaa: every AAAA question does.
enum class Behaviour {
  kZone,
  kDrop,
  kServFail,
  kRefused,
  kTruncateUdp,
  kConnRefused,
  kLoseFirstAaaa,
  kLoseAaaa
};

struct Zone {
  // name (no trailing dot) → the types it has.
  std::map<std::string, std::set<QType>> records = {
      {"kubernetes.default.svc.cluster.local", {QType::kA}},
      {"sts.ap-northeast-2.amazonaws.com", {QType::kA, QType::kAAAA}},
      {"www.amazon.com", {QType::kA, QType::kAAAA}},
      {"web.a.test", {}},  // exists, no address: NODATA
      {"web.b.test", {QType::kA}},
      {"web.d10-long-search-domain-for-line-length.test", {QType::kA}},
  };
  std::vector<Behaviour> servers = {Behaviour::kZone};
  mutable std::set<std::string> lost_aaaa;

  std::optional<Reply> Answer(const WireQuery& q) const {
    Behaviour b = servers.at(static_cast<std::size_t>(q.server));
    Reply r;
    if (!q.raw.empty()) {  // a malformed question (musl, a search entry "."): FORMERR
      r.rcode = kFormErr;
      return r;
    }
    if (q.qtype == QType::kAAAA &&
        (b == Behaviour::kLoseAaaa ||
         (b == Behaviour::kLoseFirstAaaa && lost_aaaa.insert(q.name).second))) {
      return std::nullopt;
    }
    switch (b) {
      case Behaviour::kDrop:
        return std::nullopt;
      case Behaviour::kServFail:
        r.rcode = kServFail;
        return r;
      case Behaviour::kRefused:
        r.rcode = kRefused;
        return r;
      case Behaviour::kConnRefused:
        r.kind = Reply::Kind::kConnRefused;
        return r;
      case Behaviour::kTruncateUdp:
        if (!q.tcp) {
          r.truncated = true;
          return r;
        }
        r.ancount = 1;
        return r;
      case Behaviour::kZone:
      case Behaviour::kLoseFirstAaaa:
      case Behaviour::kLoseAaaa:
        break;
    }
    std::string n = q.name;
    if (!n.empty() && n.back() == '.') n.pop_back();
    auto it = records.find(n);
    if (it == records.end()) {
      r.rcode = kNxDomain;
    } else {
      r.ancount = it->second.count(q.qtype) ? 1 : 0;
    }
    return r;
  }
};

struct Walk {
  Result result;
  std::vector<WireQuery> sent;
  int deadlines = 0;
};

// Runs a model to its end: replies are delivered in send order; when none is left to deliver,
// the deadline fires. Bounded (1,000 events).
Walk Drive(ResolverModel& m, const Zone& zone) {
  Walk w;
  std::deque<std::pair<int, Reply>> inbox;
  auto take = [&](const Actions& a) {
    for (const auto& q : a.send) {
      w.sent.push_back(q);
      if (auto r = zone.Answer(q)) inbox.emplace_back(q.id, *r);
    }
    return a.done;
  };
  bool done = take(m.Start());
  for (int i = 0; !done && i < 1000; ++i) {
    if (!inbox.empty()) {
      auto [id, r] = inbox.front();
      inbox.pop_front();
      done = take(m.OnReply(id, r));
    } else {
      ++w.deadlines;
      done = take(m.OnDeadline());
    }
  }
  EXPECT_TRUE(done) << "the walk did not end";
  w.result = m.result();
  return w;
}

struct Case {
  std::string label;
  std::string resolv_conf;
  std::string name;
  Libc libc;
  int queries;
  Result result;
  std::vector<Behaviour> servers = {Behaviour::kZone};
  int nxdomain = -1;  // -1: not checked
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

class ModelTest : public ::testing::TestWithParam<Case> {};

TEST_P(ModelTest, Walk) {
  const Case& c = GetParam();
  ResolvConf conf = ParseResolvConf(c.resolv_conf, c.libc, {});
  conf.nameservers.resize(c.servers.size(), conf.nameservers.front());
  Zone zone;
  zone.servers = c.servers;
  auto m = MakeModel(c.libc, conf, c.name);
  Walk w = Drive(*m, zone);
  std::string trace;
  for (const auto& q : w.sent) {
    trace += std::string("  ") + QTypeName(q.qtype) + " " + q.name + " @" +
             std::to_string(q.server) + (q.tcp ? "/tcp" : "") + "\n";
  }
  EXPECT_EQ(static_cast<int>(w.sent.size()), c.queries) << trace;
  EXPECT_STREQ(ResultName(w.result), ResultName(c.result)) << trace;
  if (c.nxdomain >= 0) {
    int nx = 0;
    for (const auto& q : w.sent) {
      auto r = zone.Answer(q);
      nx += r && r->rcode == kNxDomain ? 1 : 0;
    }
    EXPECT_EQ(nx, c.nxdomain) << trace;
  }
}

std::string Ndots(int n) {
  return std::string(kSearch) + "options ndots:" + std::to_string(n) + "\n";
}

const char* kK8sSearchRoot =
    "search default.svc.cluster.local svc.cluster.local cluster.local .\noptions ndots:5\n";

const std::string kLost = "options timeout:1 attempts:2 ";

const Libc G = Libc::kGlibc;
const Libc M = Libc::kMusl;
using B = Behaviour;

// One row per case reads as a table.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Reference, ModelTest,
    ::testing::Values(
        // The issue's table (ndots:5, 4 search domains).
        Case{"glibc_sts_ndots5", Ndots(5), "sts.ap-northeast-2.amazonaws.com", G, 10,
             Result::kSuccess, {B::kZone}, 8},
        Case{"musl_sts_ndots5", Ndots(5), "sts.ap-northeast-2.amazonaws.com", M, 10,
             Result::kSuccess, {B::kZone}, 8},
        Case{"glibc_sts_absolute", Ndots(5), "sts.ap-northeast-2.amazonaws.com.", G, 2,
             Result::kSuccess, {B::kZone}, 0},
        Case{"musl_sts_absolute", Ndots(5), "sts.ap-northeast-2.amazonaws.com.", M, 2,
             Result::kSuccess, {B::kZone}, 0},
        Case{"glibc_k8s_default_ndots5", Ndots(5), "kubernetes.default", G, 4, Result::kSuccess,
             {B::kZone}, 2},
        Case{"musl_k8s_default_ndots5", Ndots(5), "kubernetes.default", M, 4, Result::kSuccess,
             {B::kZone}, 2},
        Case{"glibc_k8s_fqdn_ndots5", Ndots(5), "kubernetes.default.svc.cluster.local", G, 10,
             Result::kSuccess, {B::kZone}, 8},
        Case{"musl_k8s_fqdn_ndots5", Ndots(5), "kubernetes.default.svc.cluster.local", M, 10,
             Result::kSuccess, {B::kZone}, 8},
        Case{"glibc_www_ndots5", Ndots(5), "www.amazon.com", G, 10, Result::kSuccess, {B::kZone},
             8},
        Case{"musl_www_ndots5", Ndots(5), "www.amazon.com", M, 10, Result::kSuccess, {B::kZone},
             8},
        // ndots:1: external names drop to 2; kubernetes.default leaks upstream first.
        Case{"glibc_sts_ndots1", Ndots(1), "sts.ap-northeast-2.amazonaws.com", G, 2,
             Result::kSuccess},
        Case{"musl_sts_ndots1", Ndots(1), "sts.ap-northeast-2.amazonaws.com", M, 2,
             Result::kSuccess},
        Case{"glibc_k8s_default_ndots1", Ndots(1), "kubernetes.default", G, 6, Result::kSuccess,
             {B::kZone}, 4},
        Case{"musl_k8s_default_ndots1", Ndots(1), "kubernetes.default", M, 2, Result::kNxDomain,
             {B::kZone}, 2},
        // Absolute names never search, even when not found.
        Case{"glibc_absolute_nxdomain", Ndots(5), "nope.example.", G, 2, Result::kNxDomain},
        Case{"musl_absolute_nxdomain", Ndots(5), "nope.example.", M, 2, Result::kNxDomain},
        // Not found anywhere: every candidate (glibc: as-is first when dots >= ndots).
        Case{"glibc_nxdomain_ndots1", Ndots(1), "nope.example", G, 10, Result::kNxDomain},
        Case{"musl_nxdomain_ndots1", Ndots(1), "nope.example", M, 2, Result::kNxDomain},
        Case{"glibc_dotless_nxdomain", Ndots(1), "nope", G, 10, Result::kNxDomain},
        Case{"glibc_dotless_no_tld_query", Ndots(1) + "options no-tld-query\n", "nope", G, 8,
             Result::kNxDomain},
        Case{"musl_dotless_nxdomain", Ndots(1), "nope", M, 10, Result::kNxDomain},
        // A search domain that answers NODATA: glibc walks on, musl stops there, without an
        // address: EAI_NONAME (musl 1.2.3 has no EAI_NODATA; lookup_name.c name_from_dns).
        Case{"glibc_nodata_walks_on", "search a.test b.test\n", "web", G, 4, Result::kSuccess},
        Case{"musl_nodata_stops", "search a.test b.test\n", "web", M, 2, Result::kNxDomain},
        // Options that change the questions.
        Case{"glibc_no_aaaa", Ndots(5) + "options no-aaaa\n", "www.amazon.com", G, 5,
             Result::kSuccess},
        Case{"musl_ignores_no_aaaa", Ndots(5) + "options no-aaaa\n", "www.amazon.com", M, 10,
             Result::kSuccess},
        Case{"glibc_single_request", Ndots(5) + "options single-request\n", "www.amazon.com", G,
             10, Result::kSuccess},
        Case{"glibc_root_in_search", "search . a.test\noptions ndots:2\n", "nope.example", G, 4,
             Result::kNxDomain},
        // kubelet 1.25.0's "search ... ." (kubernetes#112135), ndots:5, google.com NXDOMAIN:
        // glibc asks google.com. for the "." entry and not again as is (8); musl asks
        // "google.com.." — a malformed question (MuslQuery) no server answers — every 2.5 s
        // until the 5 s timeout (4), and the walk ends there (10, EAI_AGAIN). Real glibc 2.36
        // and musl 1.2.3 on the wire: 8 and 10 (issue 28; lab_dns_truth fid-search-root).
        Case{"glibc_search_root_entry", kK8sSearchRoot, "google.com", G, 8, Result::kNxDomain},
        Case{"musl_search_root_entry", kK8sSearchRoot, "google.com", M, 10, Result::kTimeout},
        // An entry ending in a dot is an absolute domain for both: one question per type.
        Case{"glibc_search_entry_dot", "search a.test. b.test\n", "web", G, 4, Result::kSuccess},
        Case{"musl_search_entry_dot", "search a.test. b.test\n", "web", M, 2, Result::kNxDomain},
        // An entry ".." gives "web..."/"web..": glibc's ns_name_pton refuses it (NO_RECOVERY
        // ends the search; "web" is still asked as is), musl's res_mkquery refuses it and the
        // walk ends (res_query.c __res_context_search, lookup_name.c name_from_dns).
        Case{"glibc_search_entry_two_dots", "search .. b.test\n", "web", G, 2, Result::kNxDomain},
        Case{"musl_search_entry_two_dots", "search .. b.test\n", "web", M, 0, Result::kError}),
    [](const auto& info) { return info.param.label; });

INSTANTIATE_TEST_SUITE_P(
    Faults, ModelTest,
    ::testing::Values(
        // SERVFAIL: glibc re-asks per attempt and walks on to the next name; musl re-asks at
        // once within its budget (2 + 4 per round), never accepts it, and ends with EAI_AGAIN.
        Case{"glibc_servfail", "search lab.test\noptions attempts:2\n", "faulty.example", G, 8,
             Result::kServFail, {B::kServFail}},
        Case{"musl_servfail", "search lab.test\noptions attempts:2\n", "faulty.example", M, 12,
             Result::kServFail, {B::kServFail}},
        // REFUSED: glibc passes it on to the next server / attempt, then the walk stops but the
        // as-is name (not yet tried) still goes; musl ignores it and times out.
        Case{"glibc_refused", "search lab.test\noptions attempts:2\n", "faulty.example", G, 8,
             Result::kError, {B::kRefused}},
        Case{"glibc_refused_ndots5", "search lab.test\noptions attempts:2 ndots:5\n",
             "faulty.example", G, 8, Result::kError, {B::kRefused}},
        Case{"musl_refused", "search lab.test\noptions attempts:2\n", "faulty.example", M, 4,
             Result::kTimeout, {B::kRefused}},
        // Silence: attempts × nameservers per name (glibc), rounds × nameservers (musl).
        Case{"glibc_timeout", "search lab.test\noptions attempts:2\n", "faulty.example", G, 8,
             Result::kTimeout, {B::kDrop}},
        Case{"glibc_timeout_two_servers", "search lab.test\noptions attempts:3\n",
             "faulty.example", G, 24, Result::kTimeout, {B::kDrop, B::kDrop}},
        Case{"musl_timeout", "search lab.test\noptions attempts:2\n", "faulty.example", M, 4,
             Result::kTimeout, {B::kDrop}},
        // 5 s / 3 attempts = 1666 ms: rounds at 0, 1666, 3332 and 4998 ms (< 5000): 4 rounds.
        Case{"musl_timeout_two_servers", "search lab.test\noptions attempts:3\n",
             "faulty.example", M, 16, Result::kTimeout, {B::kDrop, B::kDrop}},
        // One silent server of two: glibc moves on to the second; musl asked both at once.
        Case{"glibc_first_server_silent", Ndots(5), "www.amazon.com.", G, 4, Result::kSuccess,
             {B::kDrop, B::kZone}},
        Case{"musl_first_server_silent", Ndots(5), "www.amazon.com.", M, 4, Result::kSuccess,
             {B::kDrop, B::kZone}},
        // Truncated: glibc re-asks both over TCP; musl takes the empty truncated answer.
        Case{"glibc_tc_tcp", "", "faulty.example.", G, 4, Result::kSuccess, {B::kTruncateUdp}},
        Case{"musl_tc_used_as_is", "", "faulty.example.", M, 2, Result::kNxDomain,
             {B::kTruncateUdp}},
        // ECONNREFUSED from every server and attempt: the as-is try just fails (its h_errno is
        // saved), the first search domain aborts the walk.
        Case{"glibc_connrefused", "search lab.test\nsearch lab.test other.test\noptions attempts:2\n",
             "faulty.example", G, 8, Result::kError, {B::kConnRefused}},
        // A lost AAAA reply (res_send.c send_dg: the pair again, single-request, then
        // single-request-reopen, then the one answer; res_msend.c: the next round). Real glibc
        // 2.36, single-request timeout:1 attempts:2, first AAAA lost: A, AAAA, A, AAAA, both
        // addresses after 1.0 s (issue 28; lab_dns_truth fid-lost-aaaa).
        Case{"glibc_single_request_lose_first_aaaa", kLost + "single-request\n",
             "www.amazon.com.", G, 4, Result::kSuccess, {B::kLoseFirstAaaa}},
        Case{"glibc_lose_first_aaaa", kLost + "\n", "www.amazon.com.", G, 4, Result::kSuccess,
             {B::kLoseFirstAaaa}},
        Case{"musl_lose_first_aaaa", kLost + "\n", "www.amazon.com.", M, 3, Result::kSuccess,
             {B::kLoseFirstAaaa}},
        Case{"glibc_lose_aaaa", kLost + "\n", "www.amazon.com.", G, 6, Result::kSuccess,
             {B::kLoseAaaa}},
        Case{"glibc_single_request_lose_aaaa", kLost + "single-request\n", "www.amazon.com.", G,
             4, Result::kSuccess, {B::kLoseAaaa}},
        Case{"glibc_single_request_reopen_lose_aaaa", kLost + "single-request-reopen\n",
             "www.amazon.com.", G, 2, Result::kSuccess, {B::kLoseAaaa}},
        Case{"glibc_use_vc_no_udp_retry", kLost + "use-vc\n", "www.amazon.com.", G, 2,
             Result::kSuccess, {B::kLoseAaaa}},
        Case{"glibc_no_aaaa_nothing_lost", kLost + "no-aaaa\n", "www.amazon.com.", G, 1,
             Result::kSuccess, {B::kLoseAaaa}},
        Case{"musl_lose_aaaa", kLost + "\n", "www.amazon.com.", M, 3, Result::kTimeout,
             {B::kLoseAaaa}},
        // The switch holds for the rest of the walk: nope.lab.test 2 + 2, nope 2 + 2.
        Case{"glibc_lost_aaaa_switch_holds", "search lab.test\n" + kLost + "\n", "nope", G, 8,
             Result::kNxDomain, {B::kLoseFirstAaaa}}),
    [](const auto& info) { return info.param.label; });
// clang-format on

// A search line of 10 domains (the last holds the name), 437 bytes: more than musl's line
// buffer holds.
std::string LongSearchLine() {
  std::string line = "search";
  for (int i = 1; i <= 10; ++i) {
    std::string d = "d" + std::to_string(i) + "-long-search-domain-for-line-length.test";
    line += " " + d;
  }
  return line + "\n";
}

// The field cases of the resolver fidelity issue, with the values real glibc 2.36 and musl
// 1.2.3 give (the lab test lab_dns_truth measures the same cases on the wire).
INSTANTIATE_TEST_SUITE_P(
    Fidelity, ModelTest,
    ::testing::Values(
        // musl skips the 302-byte search line: "web." alone. glibc reads it all.
        Case{"musl_long_search_line", LongSearchLine() + "options ndots:5\n", "web", M, 2,
             Result::kNxDomain},
        Case{"glibc_long_search_line", LongSearchLine() + "options ndots:5\n", "web", G, 20,
             Result::kSuccess},
        // CRLF: glibc asks "web.b.test\r" (not found), then "web"; musl finds web.b.test.
        Case{"glibc_crlf_search", "search c.test b.test\r\n", "web", G, 6, Result::kNxDomain},
        Case{"musl_crlf_search", "search c.test b.test\r\n", "web", M, 4, Result::kSuccess},
        // timeout:0: glibc's 1 s floor; musl's send loop never runs (EAI_AGAIN, nothing sent).
        Case{"glibc_timeout0", "options timeout:0\n", "web.a.test", G, 2, Result::kNoData},
        Case{"musl_timeout0", "options timeout:0\n", "web.a.test", M, 0, Result::kTimeout},
        // attempts:0: glibc makes no try (ECONNREFUSED); musl divides by zero.
        Case{"glibc_attempts0", "options attempts:0\n", "web.a.test", G, 0, Result::kError},
        Case{"musl_attempts0", "options attempts:0\n", "web.a.test", M, 0, Result::kError},
        // Names the libcs cannot put in a question: nothing sent.
        Case{"glibc_empty_label", Ndots(5), "a..b", G, 0, Result::kError},
        Case{"musl_empty_label", Ndots(5), "a..b", M, 0, Result::kError},
        Case{"glibc_name_over_253", Ndots(1),
             std::string(62, 'a') + "." + std::string(62, 'b') + "." + std::string(62, 'c') + "." +
                 std::string(62, 'd') + ".example",
             G, 0, Result::kError},
        Case{"musl_name_over_253", Ndots(1),
             std::string(62, 'a') + "." + std::string(62, 'b') + "." + std::string(62, 'c') + "." +
                 std::string(62, 'd') + ".example",
             M, 0, Result::kError},
        Case{"musl_two_trailing_dots", Ndots(1), "web..", M, 0, Result::kError},
        Case{"glibc_two_trailing_dots", Ndots(1), "web..", G, 0, Result::kError}),
    [](const auto& info) { return info.param.label; });

TEST(EncodableTest, LabelsAndLength) {
  EXPECT_TRUE(Encodable("a.b"));
  EXPECT_TRUE(Encodable("a.b."));
  EXPECT_FALSE(Encodable("a..b"));
  EXPECT_FALSE(Encodable(".a"));
  EXPECT_FALSE(Encodable("a.."));
  EXPECT_FALSE(Encodable(""));
  EXPECT_TRUE(Encodable(std::string(63, 'x')));
  EXPECT_FALSE(Encodable(std::string(64, 'x')));
  std::string n253 = std::string(63, 'a') + "." + std::string(63, 'b') + "." +
                     std::string(63, 'c') + "." + std::string(61, 'd');
  ASSERT_EQ(n253.size(), 253u);
  EXPECT_TRUE(Encodable(n253));
  EXPECT_TRUE(Encodable(n253 + "."));
  EXPECT_FALSE(Encodable(n253 + "d"));
}

// Which socket and which ID each question of a lost-reply retry goes with (res_send.c send_dg:
// "goto retry" keeps the socket, "goto retry_reopen" and single-request-reopen's second question
// take a new one; the query buffers, so the IDs, stay).
TEST(ModelRetryTest, SocketsAndIds) {
  struct Want {
    std::string options;
    std::vector<int> sockets;
    std::vector<int> same_id_as;  // index of the question whose ID it reuses + 1; 0: new
  };
  for (const Want& w : {
           Want{"", {0, 0, 0, 0}, {0, 0, 1, 2}},
           Want{"single-request", {0, 0, 1, 2}, {0, 0, 1, 2}},
       }) {
    ResolvConf conf = ParseResolvConf(kLost + w.options + "\n", Libc::kGlibc, {});
    Zone zone;
    zone.servers = {B::kLoseFirstAaaa};
    auto m = MakeGlibcModel(conf, "www.amazon.com.");
    Walk walk = Drive(*m, zone);
    ASSERT_EQ(walk.sent.size(), w.sockets.size()) << w.options;
    for (std::size_t i = 0; i < walk.sent.size(); ++i) {
      const WireQuery& q = walk.sent[i];
      EXPECT_EQ(q.socket, w.sockets[i]) << w.options << " question " << i;
      int want = w.same_id_as[i] ? walk.sent[static_cast<std::size_t>(w.same_id_as[i] - 1)].id : 0;
      EXPECT_EQ(q.same_id_as, want) << w.options << " question " << i;
    }
    EXPECT_EQ(walk.sent[2].qtype, QType::kA);
    EXPECT_EQ(walk.sent[3].qtype, QType::kAAAA);
  }
}

// musl 1.2.3 src/network/res_mkquery.c, byte for byte (the layout a capture of real musl shows
// for "google.com.." in lab_dns_truth fid-search-root).
TEST(MuslQueryTest, Bytes) {
  auto hex = [](const std::optional<std::string>& m) {
    std::string out;
    for (unsigned char c : m.value_or(""))
      out += "0123456789abcdef"[c >> 4], out += "0123456789abcdef"[c & 15];
    return out;
  };
  const std::string header = "000001000001000000000000";
  EXPECT_EQ(hex(MuslQuery("google.com", QType::kA)), header +
                                                         "06676f6f676c6503636f6d00"
                                                         "00010001");
  EXPECT_EQ(hex(MuslQuery("google.com.", QType::kAAAA)), header +
                                                             "06676f6f676c6503636f6d00"
                                                             "001c0001");
  // The second trailing dot stays where the terminating zero belongs, one zero byte more.
  EXPECT_EQ(hex(MuslQuery("google.com..", QType::kA)), header +
                                                           "06676f6f676c6503636f6d2e"
                                                           "000100"
                                                           "0100");
  EXPECT_FALSE(MuslQuery("google.com...", QType::kA));
  EXPECT_FALSE(MuslQuery("a..b", QType::kA));
  EXPECT_FALSE(MuslQuery(".a", QType::kA));
  EXPECT_FALSE(MuslQuery("..", QType::kA));
  EXPECT_FALSE(MuslQuery(std::string(64, 'x'), QType::kA));
  EXPECT_TRUE(MuslQuery(std::string(63, 'x') + "..", QType::kA));
  EXPECT_EQ(hex(MuslQuery(".", QType::kA)), header +
                                                "00"
                                                "00010001");
}

TEST(ModelBoundTest, MaxDuration) {
  ResolvConf conf = ParseResolvConf(
      "nameserver 10.0.0.1\nnameserver 10.0.0.2\nsearch a b\noptions timeout:2 attempts:3\n",
      Libc::kGlibc, {});
  // glibc: per name attempts × (2 s + 2·2/2 s) = 3 × 4 s, up to 3 windows each (a lost reply
  // of the pair: parallel, single-request, single-request-reopen); 3 names; twice (answers
  // too big for getaddrinfo's buffer run the lookup again).
  EXPECT_EQ(MakeGlibcModel(conf, "x")->MaxDuration(), std::chrono::seconds(2 * 108));
  // musl: timeout per name; 3 names (2 search + bare).
  EXPECT_EQ(MakeMuslModel(conf, "x")->MaxDuration(), std::chrono::seconds(6));
}

}  // namespace
}  // namespace podnet::probes::dns
