// dns-explain's explanations against the models' real walks: an in-process DNS server on
// 127.0.0.1:0, the lookup driver (c-ares) and the models; every alternative's cost is checked
// against the same model really run on the wire with that alternative.
#include "exporter/probes/dns/explain.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "tests/unit/probes/dns/run_lookup.h"
#include "tests/unit/testing/loopback_dns.h"

namespace podnet::probes::dns {
namespace explain_test {

using podnet::testing::LoopbackDns;

ResolvConf Conf(std::uint16_t port, const std::string& text, Libc libc) {
  ResolvConf c = ParseResolvConf(text, libc, {});
  c.nameservers = {{boost::asio::ip::make_address("127.0.0.1"), port}};
  return c;
}

int Lines(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The search list first (0 and 2 dots < ndots:5), as written first (5 dots), found and not
// found: the trailing dot's and the lower ndots' costs equal the question counts of the model
// run on the wire with the dot / that ndots; replaying the walk itself gives its own count.
TEST(ExplainTest, AlternativesCostWhatTheModelAsksOnTheWire) {
  boost::asio::io_context io;
  LoopbackDns dns(io, {"web.b.test", "api.example.com", "a.b.c.d.e.f"});
  for (Libc libc : {Libc::kGlibc, Libc::kMusl}) {
    ResolvConf conf =
        Conf(dns.port(), "search a.test b.test\noptions ndots:5 timeout:1 attempts:1\n", libc);
    for (std::string name : {"web", "api.example.com", "nothing.example", "a.b.c.d.e.f"}) {
      SCOPED_TRACE(std::string(LibcName(libc)) + " " + name);
      std::ostringstream out;
      ExplainedWalk e = ExplainWalk(io, conf, libc, name, "test.conf", "", out);
      const std::string text = out.str();
      ASSERT_FALSE(e.outcome.queries.empty()) << text;
      // One "why:" per question row.
      EXPECT_EQ(Lines(text, "  why: "), static_cast<int>(e.outcome.queries.size())) << text;
      EXPECT_EQ(e.rules.size(), e.outcome.queries.size());
      ReplayedWalk self = ReplayWalk(conf, libc, name, e.outcome);
      EXPECT_EQ(self.questions, static_cast<int>(e.outcome.queries.size()));
      EXPECT_EQ(self.result, e.outcome.result);
      EXPECT_FALSE(self.assumed);

      LookupOutcome dotted = RunLookup(io, conf, libc, name + ".");
      EXPECT_EQ(e.trailing_dot.questions, static_cast<int>(dotted.queries.size())) << text;
      EXPECT_EQ(e.trailing_dot.result, dotted.result) << text;
      EXPECT_NE(
          text.find(fmt::format("with a trailing dot ({}.): {} question{}", name,
                                dotted.queries.size(), dotted.queries.size() == 1 ? "" : "s")),
          std::string::npos)
          << text;
      const int dots = static_cast<int>(std::count(name.begin(), name.end(), '.'));
      if (dots >= conf.ndots) {
        EXPECT_EQ(e.lower_ndots, -1);
        continue;
      }
      ResolvConf lower = conf;
      lower.ndots = dots;
      ASSERT_EQ(e.lower_ndots, dots);
      LookupOutcome relaxed = RunLookup(io, lower, libc, name);
      EXPECT_EQ(e.with_lower_ndots.questions, static_cast<int>(relaxed.queries.size())) << text;
      EXPECT_EQ(e.with_lower_ndots.result, relaxed.result) << text;
    }
  }
}

// The rule of each question: dots vs ndots, the search list's order and origin (a domain line),
// the name as written; "1 answer", never "1 answers".
TEST(ExplainTest, RulesNameDotsSearchOrderAndTheDomainLine) {
  boost::asio::io_context io;
  LoopbackDns dns(io, {"web.b.test"});
  const std::string text = "domain b.test\noptions ndots:2 timeout:1 attempts:1\n";
  for (Libc libc : {Libc::kGlibc, Libc::kMusl}) {
    SCOPED_TRACE(LibcName(libc));
    ResolvConf conf = Conf(dns.port(), text, libc);
    const std::string origin = SearchOrigin(text, libc, {});
    EXPECT_EQ(origin, "the domain line");
    std::ostringstream out;
    ExplainedWalk e = ExplainWalk(io, conf, libc, "web", "test.conf", origin, out);
    ASSERT_EQ(e.outcome.queries.size(), 2u) << out.str();  // web.b.test A and AAAA: found
    for (const auto& r : e.rules) {
      EXPECT_EQ(r,
                "0 dots < ndots:2: the search list first, search list entry 1 of 1 (b.test, "
                "from the domain line)");
    }
    EXPECT_EQ(Lines(out.str(), ", 1 answer at"), 2) << out.str();
    EXPECT_EQ(Lines(out.str(), "answers"), 0) << out.str();

    std::ostringstream out2;
    ExplainedWalk f = ExplainWalk(io, conf, libc, "x.y.test", "test.conf", origin, out2);
    ASSERT_FALSE(f.rules.empty());
    EXPECT_EQ(f.rules[0], "2 dots >= ndots:2: as written first") << out2.str();
    EXPECT_NE(out2.str().find("a lower ndots changes nothing"), std::string::npos);
    if (libc == Libc::kGlibc) {  // glibc goes on to the search list after NXDOMAIN
      ASSERT_EQ(f.rules.size(), 4u) << out2.str();
      EXPECT_EQ(f.rules[2],
                "the name as written failed: search list entry 1 of 1 (b.test, from "
                "the domain line)");
    } else {  // musl: the name alone
      EXPECT_EQ(f.rules.size(), 2u) << out2.str();
    }
  }
  EXPECT_EQ(SearchOrigin("domain b.test\nsearch a.test\n", Libc::kGlibc, {}), "");
  EXPECT_EQ(SearchOrigin("search a.test\ndomain\tb.test\n", Libc::kMusl, {}), "the domain line");
  config::EnvLookup env = [](const std::string& k) -> std::optional<std::string> {
    if (k == "LOCALDOMAIN") return "c.test";
    return std::nullopt;
  };
  EXPECT_EQ(SearchOrigin("search a.test\n", Libc::kGlibc, env), "LOCALDOMAIN");
  EXPECT_EQ(SearchOrigin("search a.test\n", Libc::kMusl, env), "");
}

// A search list entry the libc does not ask (the candidate is 257 bytes: over musl's 255, and
// not a question for glibc) is named with its reason; the name as written is still asked.
TEST(ExplainTest, SkippedSearchEntriesSayWhy) {
  boost::asio::io_context io;
  LoopbackDns dns(io, {});
  const std::string name = std::string(63, 'a') + "." + std::string(63, 'b') + "." +
                           std::string(63, 'c') + "." + std::string(58, 'd');  // 250 bytes
  for (Libc libc : {Libc::kGlibc, Libc::kMusl}) {
    SCOPED_TRACE(LibcName(libc));
    ResolvConf conf =
        Conf(dns.port(), "search x.test\noptions ndots:5 timeout:1 attempts:1\n", libc);
    std::ostringstream out;
    ExplainedWalk e = ExplainWalk(io, conf, libc, name, "test.conf", "", out);
    for (const auto& q : e.outcome.queries) EXPECT_EQ(q.query.name, name);
    EXPECT_NE(out.str().find("skipped search list entry 1 of 1 (x.test): "), std::string::npos)
        << out.str();
  }
}

}  // namespace explain_test
}  // namespace podnet::probes::dns
