#include "exporter/probes/dns/resolv_conf.h"

#include <gtest/gtest.h>

#include <map>

namespace podnet::probes::dns {
namespace {

config::EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::vector<std::string> Servers(const ResolvConf& c) {
  std::vector<std::string> out;
  for (const auto& ns : c.nameservers) out.push_back(ns.address.to_string());
  return out;
}

TEST(ResolvConfTest, KubernetesPod) {
  auto c = ParseResolvConf(
      "search podnet.svc.cluster.local svc.cluster.local cluster.local "
      "ap-northeast-2.compute.internal\nnameserver 172.20.0.10\noptions ndots:5\n",
      Libc::kGlibc, Env({}));
  EXPECT_EQ(Servers(c), std::vector<std::string>{"172.20.0.10"});
  EXPECT_EQ(c.search,
            (std::vector<std::string>{"podnet.svc.cluster.local", "svc.cluster.local",
                                      "cluster.local", "ap-northeast-2.compute.internal"}));
  EXPECT_EQ(c.ndots, 5);
  EXPECT_EQ(c.timeout_s, 5);
  EXPECT_EQ(c.attempts, 2);
}

TEST(ResolvConfTest, Defaults) {
  for (Libc l : {Libc::kGlibc, Libc::kMusl}) {
    auto c = ParseResolvConf("", l, Env({}));
    EXPECT_EQ(Servers(c), std::vector<std::string>{"127.0.0.1"});
    EXPECT_TRUE(c.search.empty());
    EXPECT_EQ(c.ndots, 1);
    EXPECT_EQ(c.timeout_s, 5);
    EXPECT_EQ(c.attempts, 2);
  }
}

TEST(ResolvConfTest, AtMostThreeNameserversIpv4AndIpv6) {
  auto c = ParseResolvConf(
      "nameserver 10.0.0.1\nnameserver fe80::1%nosuch0\nnameserver not-an-ip\n"
      "nameserver 2001:db8::53\nnameserver 10.0.0.4\n",
      Libc::kGlibc, Env({}));
  EXPECT_EQ(Servers(c), (std::vector<std::string>{"10.0.0.1", "fe80::1", "2001:db8::53"}));
}

TEST(ResolvConfTest, CommentsAndKeywordsNeedABlank) {
  auto c = ParseResolvConf(
      "# nameserver 10.0.0.9\n; search bad.example\nnameserver10.0.0.8\nsearchx a\n"
      "nameserver\t10.0.0.1\nsearch\tgood.example\n",
      Libc::kGlibc, Env({}));
  EXPECT_EQ(Servers(c), std::vector<std::string>{"10.0.0.1"});
  EXPECT_EQ(c.search, std::vector<std::string>{"good.example"});
}

TEST(ResolvConfTest, LastOfSearchAndDomainWins) {
  auto g = ParseResolvConf("search a.example b.example\ndomain c.example d.example\n", Libc::kGlibc,
                           Env({}));
  EXPECT_EQ(g.search, std::vector<std::string>{"c.example"});  // glibc: domain = one entry
  auto m = ParseResolvConf("search a.example b.example\ndomain c.example d.example\n", Libc::kMusl,
                           Env({}));
  EXPECT_EQ(m.search, (std::vector<std::string>{"c.example", "d.example"}));  // musl: the line
  auto s = ParseResolvConf("domain c.example\nsearch a.example b.example\n", Libc::kGlibc, Env({}));
  EXPECT_EQ(s.search, (std::vector<std::string>{"a.example", "b.example"}));
}

struct OptionCase {
  std::string name;
  std::string options;
  Libc libc;
  ResolvConf want;  // nameservers/search filled in by the test
};

ResolvConf With(std::function<void(ResolvConf&)> f) {
  ResolvConf c;
  f(c);
  return c;
}

class OptionsTest : public ::testing::TestWithParam<OptionCase> {};

TEST_P(OptionsTest, Parses) {
  const auto& tc = GetParam();
  auto c = ParseResolvConf("nameserver 10.0.0.1\noptions " + tc.options + "\n", tc.libc, Env({}));
  ResolvConf want = tc.want;
  want.nameservers = c.nameservers;
  EXPECT_EQ(c.ndots, want.ndots);
  EXPECT_EQ(c.timeout_s, want.timeout_s);
  EXPECT_EQ(c.attempts, want.attempts);
  EXPECT_EQ(c, want);
}

INSTANTIATE_TEST_SUITE_P(
    Table, OptionsTest,
    ::testing::Values(
        OptionCase{"glibc_ndots", "ndots:5", Libc::kGlibc, With([](auto& c) { c.ndots = 5; })},
        OptionCase{"glibc_ndots_cap", "ndots:99", Libc::kGlibc,
                   With([](auto& c) { c.ndots = 15; })},
        OptionCase{"glibc_timeout_cap", "timeout:99", Libc::kGlibc,
                   With([](auto& c) { c.timeout_s = 30; })},
        OptionCase{"glibc_attempts_cap", "attempts:9", Libc::kGlibc,
                   With([](auto& c) { c.attempts = 5; })},
        OptionCase{"glibc_ndots_not_a_number", "ndots:x", Libc::kGlibc,
                   With([](auto& c) { c.ndots = 0; })},  // atoi
        OptionCase{"glibc_flags",
                   "rotate single-request single-request-reopen edns0 use-vc no-aaaa trust-ad "
                   "no-tld-query",
                   Libc::kGlibc, With([](auto& c) {
                     c.rotate = c.single_request = c.single_request_reopen = c.edns0 = true;
                     c.use_vc = c.no_aaaa = c.trust_ad = c.no_tld_query = true;
                   })},
        OptionCase{"glibc_unknown_ignored", "debug inet6 frobnicate ndots:2", Libc::kGlibc,
                   With([](auto& c) { c.ndots = 2; })},
        OptionCase{"musl_caps", "ndots:99 timeout:99 attempts:99", Libc::kMusl, With([](auto& c) {
                     c.ndots = 15;
                     c.timeout_s = 60;
                     c.attempts = 10;
                   })},
        OptionCase{"musl_ignores_flags", "rotate single-request edns0 use-vc no-aaaa ndots:3",
                   Libc::kMusl, With([](auto& c) { c.ndots = 3; })},
        OptionCase{"musl_needs_a_digit", "ndots:x", Libc::kMusl, With([](auto&) {})}),
    [](const auto& info) { return info.param.name; });

TEST(ResolvConfTest, EnvironmentOverridesGlibcOnly) {
  auto env = Env({{"LOCALDOMAIN", "x.example  y.example"}, {"RES_OPTIONS", "ndots:3 no-aaaa"}});
  auto g = ParseResolvConf("search a.example\noptions ndots:5\n", Libc::kGlibc, env);
  EXPECT_EQ(g.search, (std::vector<std::string>{"x.example", "y.example"}));
  EXPECT_EQ(g.ndots, 3);
  EXPECT_TRUE(g.no_aaaa);
  auto m = ParseResolvConf("search a.example\noptions ndots:5\n", Libc::kMusl, env);
  EXPECT_EQ(m.search, std::vector<std::string>{"a.example"});
  EXPECT_EQ(m.ndots, 5);
}

TEST(ResolvConfTest, MissingFileIsDefaults) {
  bool readable = true;
  auto c = LoadResolvConf("/nonexistent/resolv.conf", Libc::kGlibc, Env({}), &readable);
  EXPECT_FALSE(readable);
  EXPECT_EQ(Servers(c), std::vector<std::string>{"127.0.0.1"});
}

}  // namespace
}  // namespace podnet::probes::dns

namespace podnet::probes::dns {
namespace {

// musl 1.2.3 resolvconf.c: fgets(line, 256): a line with more than 254 bytes before its '\n'
// (or 255 bytes at the end of the file) does not fit and is skipped whole; glibc's getline
// reads any length. (Lab: lab_dns_truth, case musl-long-line.)
TEST(ResolvConfBytesTest, MuslSkipsALineThatDoesNotFitItsBuffer) {
  auto line_of = [](std::size_t bytes) {
    std::string l = "search a.test ";
    while (l.size() < bytes) l += "x";
    return l;
  };
  std::string fits = line_of(254), over = line_of(255);
  auto m = ParseResolvConf(fits + "\n", Libc::kMusl, Env({}));
  ASSERT_EQ(m.search.size(), 2u);
  EXPECT_EQ(m.search[0], "a.test");
  EXPECT_TRUE(ParseResolvConf(over + "\n", Libc::kMusl, Env({})).search.empty());
  EXPECT_EQ(ParseResolvConf(fits, Libc::kMusl, Env({})).search.size(), 2u);  // at EOF
  EXPECT_TRUE(ParseResolvConf(over, Libc::kMusl, Env({})).search.empty());
  // The line after a skipped one is read; an earlier search list stays.
  auto after = ParseResolvConf("search keep.test\n" + over + "\nnameserver 10.0.0.9\n", Libc::kMusl,
                               Env({}));
  EXPECT_EQ(after.search, std::vector<std::string>{"keep.test"});
  EXPECT_EQ(Servers(after), std::vector<std::string>{"10.0.0.9"});
  EXPECT_EQ(ParseResolvConf(over + "\n", Libc::kGlibc, Env({})).search.size(), 2u);
}

// glibc res_init.c splits on ' ' and '\t' only and cuts a nameserver word at " \t\n": under
// CRLF the last search domain keeps its '\r' and "127.0.0.1\r" is no address. musl splits on
// isspace. (Lab: lab_dns_truth, case crlf.)
TEST(ResolvConfBytesTest, CarriageReturnIsPartOfTheWordForGlibcOnly) {
  const char* text = "nameserver 10.0.0.1\r\nsearch a.test b.test\r\noptions ndots:2\r\n";
  auto g = ParseResolvConf(text, Libc::kGlibc, Env({}));
  EXPECT_EQ(g.search, (std::vector<std::string>{"a.test", "b.test\r"}));
  EXPECT_EQ(Servers(g), std::vector<std::string>{"127.0.0.1"});  // none read: the default
  EXPECT_EQ(g.ndots, 2);                                         // atoi stops at '\r'
  auto m = ParseResolvConf(text, Libc::kMusl, Env({}));
  EXPECT_EQ(m.search, (std::vector<std::string>{"a.test", "b.test"}));
  EXPECT_EQ(Servers(m), std::vector<std::string>{"10.0.0.1"});
  EXPECT_EQ(m.ndots, 2);
}

// Numeric options at their bounds, zero and beyond, as each libc's source computes them
// (glibc res_init.c res_setoptions: atoi, caps 15/30/5, res_state's `unsigned ndots:4`;
// musl resolvconf.c: a digit after the colon, strtoul, caps 15/10/60).
TEST(ResolvConfBytesTest, NumericOptionBounds) {
  struct Row {
    std::string options;
    Libc libc;
    int ndots, timeout, attempts;
  };
  for (const Row& r : std::vector<Row>{
           {"timeout:0 attempts:0 ndots:0", Libc::kGlibc, 0, 0, 0},
           {"timeout:0 attempts:0 ndots:0", Libc::kMusl, 0, 0, 0},
           {"ndots:-1 timeout:-3 attempts:-2", Libc::kGlibc, 15, -3, 0},
           {"ndots:-1 timeout:-3 attempts:-2", Libc::kMusl, 1, 5, 2},  // no digit after ':'
           {"ndots:99999999999999999999 timeout:31 attempts:6", Libc::kGlibc, 15, 30, 5},
           {"ndots:99999999999999999999 timeout:61 attempts:11", Libc::kMusl, 15, 60, 10},
           {"timeout:.5 ndots:3x", Libc::kMusl, 3, 5, 2},
           {"timeout:.5 ndots:3x", Libc::kGlibc, 3, 0, 2},
       }) {
    auto c = ParseResolvConf("options " + r.options + "\n", r.libc, Env({}));
    EXPECT_EQ(c.ndots, r.ndots) << r.options << " " << LibcName(r.libc);
    EXPECT_EQ(c.timeout_s, r.timeout) << r.options << " " << LibcName(r.libc);
    EXPECT_EQ(c.attempts, r.attempts) << r.options << " " << LibcName(r.libc);
  }
  // glibc matches option words by prefix (strncmp), in its table's order.
  auto g = ParseResolvConf("options rotatex no_tld_query single-request-reopen\n", Libc::kGlibc,
                           Env({}));
  EXPECT_TRUE(g.rotate);
  EXPECT_TRUE(g.no_tld_query);
  EXPECT_TRUE(g.single_request_reopen);
  EXPECT_FALSE(g.single_request);
}

// A link-local nameserver keeps its zone: both libcs send to the scoped address (glibc
// __inet6_scopeid_pton, musl lookup_ipliteral.c); an unknown interface is ignored by glibc
// (scope 0) and drops the line for musl. (Lab: lab_dns_truth, case scoped.)
TEST(ResolvConfBytesTest, ScopedNameserverKeepsItsZone) {
  for (Libc l : {Libc::kGlibc, Libc::kMusl}) {
    auto c = ParseResolvConf("nameserver fe80::53%lo\nnameserver fe80::54%7\n", l, Env({}));
    ASSERT_EQ(c.nameservers.size(), 2u) << LibcName(l);
    EXPECT_EQ(c.nameservers[0].address.to_v6().scope_id(), 1u) << LibcName(l);  // lo
    EXPECT_EQ(c.nameservers[1].address.to_v6().scope_id(), 7u) << LibcName(l);
  }
  auto g = ParseResolvConf("nameserver fe80::53%nosuch0\n", Libc::kGlibc, Env({}));
  EXPECT_EQ(g.nameservers.at(0).address.to_string(), "fe80::53");
  auto m = ParseResolvConf("nameserver fe80::53%nosuch0\n", Libc::kMusl, Env({}));
  EXPECT_EQ(Servers(m), std::vector<std::string>{"127.0.0.1"});
  // musl: only a link-local address may name an interface.
  auto m2 = ParseResolvConf("nameserver 2001:db8::53%lo\n", Libc::kMusl, Env({}));
  EXPECT_EQ(Servers(m2), std::vector<std::string>{"127.0.0.1"});
}

}  // namespace
}  // namespace podnet::probes::dns
