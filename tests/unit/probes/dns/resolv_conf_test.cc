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
      "nameserver 10.0.0.1\nnameserver fe80::1%eth0\nnameserver not-an-ip\n"
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
