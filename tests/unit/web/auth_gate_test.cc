#include "exporter/web/auth_gate.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "exporter/web/basic_auth.h"
#include "tests/unit/testing/htpasswd.h"

namespace podnet::web {
namespace {

using namespace std::chrono_literals;
using Verdict = AuthGate::Verdict;
using boost::asio::ip::make_address;

using testing::kAliceBcrypt;  // "correct horse"
// "b0b:pw", hashed by htpasswd the same way at cost 5.
constexpr char kBob[] = "$2y$05$GtTXuTJPT8t4APeW9E.kD.D4QMfuKdaOOjU0oUYLRTr7ntD9culky";

const AuthGate::Clock::time_point kT0{};
using Users = std::map<std::string, std::string>;

std::string Basic(const std::string& user_password) {
  static const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < user_password.size(); i += 3) {
    unsigned v = (unsigned char)user_password[i] << 16 | (unsigned char)user_password[i + 1] << 8 |
                 (unsigned char)user_password[i + 2];
    for (int s = 18; s >= 0; s -= 6) out += kB64[(v >> s) & 63];
  }
  std::size_t rest = user_password.size() - i;
  if (rest) {
    unsigned v = (unsigned char)user_password[i] << 16;
    if (rest == 2) v |= (unsigned char)user_password[i + 1] << 8;
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += rest == 2 ? kB64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return "Basic " + out;
}

// Whether `authorization` names a user and that user's password (one real bcrypt).
bool Verify(const BasicAuth& auth, const std::string& authorization) {
  auto c = DecodeBasic(authorization);
  return c && BasicAuth::Matches(c->password, auth.HashFor(*c));
}

TEST(BasicAuthTest, VerifiesHashesMadeByAnotherBcrypt) {
  BasicAuth auth(Users{{"alice", kAliceBcrypt}, {"bob", kBob}});
  EXPECT_TRUE(Verify(auth, Basic("alice:correct horse")));
  EXPECT_TRUE(Verify(auth, Basic("bob:b0b:pw")));                       // a password may hold ':'
  EXPECT_TRUE(Verify(auth, "basic " + Basic("bob:b0b:pw").substr(6)));  // scheme in any case
  EXPECT_FALSE(Verify(auth, Basic("alice:correct horsE")));
  EXPECT_FALSE(Verify(auth, Basic("alice:")));
  EXPECT_FALSE(Verify(auth, Basic("bob:correct horse")));  // alice's password, bob's name
  EXPECT_FALSE(Verify(auth, Basic("mallory:correct horse")));
  EXPECT_FALSE(Verify(auth, ""));
  EXPECT_FALSE(Verify(auth, "Bearer abc"));
  EXPECT_FALSE(Verify(auth, "Basic not-base64!"));
  EXPECT_FALSE(Verify(auth, "Basic " + std::string("YWxpY2U=")));  // "alice": no colon
  EXPECT_EQ(BasicAuth::User(Basic("alice:x")), "alice");
}

TEST(BasicAuthTest, UnknownUserIsCheckedAgainstAHashOfTheSameCost) {
  BasicAuth auth(Users{{"alice", kAliceBcrypt}});
  const std::string& dummy = auth.HashFor({"mallory", "x"});
  EXPECT_NE(dummy, kAliceBcrypt);
  EXPECT_EQ(dummy.substr(0, 7), "$2b$10$");
  EXPECT_FALSE(BasicAuth::Matches("", dummy));
  // Keys differ by user, password and hash; the same pair gives the same key.
  EXPECT_EQ(auth.Key({"alice", "a"}), auth.Key({"alice", "a"}));
  EXPECT_NE(auth.Key({"alice", "a"}), auth.Key({"alice", "b"}));
  EXPECT_NE(auth.Key({"alice", "a"}), auth.Key({"mallory", "a"}));
  EXPECT_EQ(auth.Key({"alice", "a"}).size(), 32u);
}

// The gate's decisions without running bcrypt: each kCheck is answered with Checked().
class AuthGateTest : public ::testing::Test {
 protected:
  AuthGate gate_{BasicAuth(Users{{"alice", kAliceBcrypt}, {"bob", kBob}}), AuthLimits{}, kT0};

  Verdict Ask(const std::string& pair, const char* source, AuthGate::Clock::time_point at,
              std::optional<bool> outcome = false) {
    auto d = gate_.Admit(Basic(pair), make_address(source), at);
    if (d.verdict == Verdict::kCheck && outcome) gate_.Checked(d.key, *outcome);
    return d.verdict;
  }
};

TEST_F(AuthGateTest, AGoodPairIsCheckedOnceThenAllowedWithoutBcrypt) {
  auto d = gate_.Admit(Basic("alice:correct horse"), make_address("10.0.0.1"), kT0);
  ASSERT_EQ(d.verdict, Verdict::kCheck);
  EXPECT_EQ(d.password, "correct horse");
  EXPECT_EQ(d.hash, kAliceBcrypt);
  EXPECT_EQ(gate_.pending(), 1u);
  gate_.Checked(d.key, BasicAuth::Matches(d.password, d.hash));
  EXPECT_EQ(gate_.pending(), 0u);
  // From now on, from any source, at any rate: a lookup, never a budget.
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(Ask("alice:correct horse", "10.9.9.9", kT0), Verdict::kAllowed);
  }
}

TEST_F(AuthGateTest, ARepeatedWrongPairCostsOneCheck) {
  EXPECT_EQ(Ask("alice:guess", "10.0.0.1", kT0), Verdict::kCheck);
  EXPECT_EQ(gate_.failed(), 1u);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(Ask("alice:guess", "10.0.0.1", kT0), Verdict::kKnownWrong);
  }
  // An unknown user goes the same way: one check (against the dummy hash), then a lookup.
  EXPECT_EQ(Ask("mallory:guess", "10.0.0.2", kT0), Verdict::kCheck);
  EXPECT_EQ(Ask("mallory:guess", "10.0.0.2", kT0), Verdict::kKnownWrong);
}

TEST_F(AuthGateTest, MissingAndMalformedCostNothing) {
  EXPECT_EQ(gate_.Admit("", make_address("10.0.0.1"), kT0).verdict, Verdict::kMissing);
  EXPECT_EQ(gate_.Admit("Bearer x", make_address("10.0.0.1"), kT0).verdict, Verdict::kMalformed);
  EXPECT_EQ(gate_.Admit("Basic YWxpY2U=", make_address("10.0.0.1"), kT0).verdict,
            Verdict::kMalformed);
  EXPECT_EQ(gate_.sources(), 0u);
}

TEST_F(AuthGateTest, OneSourceGetsItsShareOfChecks) {
  // A burst of 4, then one check every 2 s; the rest 429 with how long to wait.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(Ask("alice:" + std::to_string(i), "10.0.0.1", kT0), Verdict::kCheck);
  }
  auto d = gate_.Admit(Basic("alice:x"), make_address("10.0.0.1"), kT0);
  EXPECT_EQ(d.verdict, Verdict::kSourceLimited);
  EXPECT_EQ(d.retry_after_seconds, 2);
  EXPECT_EQ(Ask("alice:x", "10.0.0.1", kT0 + 1s), Verdict::kSourceLimited);
  EXPECT_EQ(Ask("alice:x", "10.0.0.1", kT0 + 2s), Verdict::kCheck);
  // A 429 is not remembered as wrong: the pair is checked when budget allows.
  EXPECT_EQ(gate_.failed(), 5u);
  // Another source is untouched.
  EXPECT_EQ(Ask("alice:correct horse", "10.0.0.2", kT0 + 2s, true), Verdict::kCheck);
}

TEST_F(AuthGateTest, ChecksPerSecondAreBoundedWhateverTheSources) {
  // 1000 sources, each with a new wrong password every 100 ms, for 60 s: at most the burst
  // (8) and 2 a second are checked.
  int checks = 0;
  for (int ms = 0; ms < 60000; ms += 100) {
    for (int s = 0; s < 1000; ++s) {
      std::string src = "10.1." + std::to_string(s / 250) + "." + std::to_string(s % 250);
      Verdict v = Ask("alice:" + std::to_string(ms) + "/" + std::to_string(s), src.c_str(),
                      kT0 + std::chrono::milliseconds(ms));
      checks += v == Verdict::kCheck;
      ASSERT_NE(v, Verdict::kAllowed);
    }
  }
  EXPECT_LE(checks, 8 + 2 * 60);
  EXPECT_GE(checks, 2 * 60);  // the budget is used, not wasted
  EXPECT_LE(gate_.failed(), AuthLimits{}.max_failed);
  EXPECT_LE(gate_.sources(), AuthLimits{}.max_sources);
}

TEST_F(AuthGateTest, AQuietSourceGetsACheckWhile32SourcesFlood) {
  // 32 sources ask for a check with a new password every 50 ms each for 60 s; four
  // Prometheus servers that come at 7, 22, 37 and 52 s, each with a pair not checked yet, get
  // it checked at their first try.
  int quiet_checked = 0, quiet_tries = 0;
  for (int ms = 0; ms < 60000; ms += 50) {
    auto at = kT0 + std::chrono::milliseconds(ms);
    for (int s = 0; s < 32; ++s) {
      Ask("alice:" + std::to_string(ms) + "/" + std::to_string(s),
          ("10.2.0." + std::to_string(s)).c_str(), at);
    }
    if (ms % 15000 == 7000) {
      ++quiet_tries;
      quiet_checked +=
          Ask("bob:new" + std::to_string(ms), ("10.3.0." + std::to_string(quiet_tries)).c_str(),
              at) == Verdict::kCheck;
    }
  }
  EXPECT_EQ(quiet_tries, 4);
  EXPECT_EQ(quiet_checked, 4);
}

TEST_F(AuthGateTest, PendingChecksAreBoundedWithPlacesForQuietSources) {
  // Checks that have not come back yet: at most max_pending (4) for any source, and
  // quiet_pending (2) more for quiet ones (which the worker runs first); then 429 at once.
  auto ask = [&](const std::string& pair, const char* source, AuthGate::Clock::time_point at) {
    return gate_.Admit(Basic(pair), make_address(source), at);
  };
  for (int s = 0; s < 6; ++s) {  // new sources are quiet
    auto d = ask("alice:p" + std::to_string(s), ("10.4.0." + std::to_string(s)).c_str(), kT0);
    EXPECT_EQ(d.verdict, Verdict::kCheck);
    EXPECT_TRUE(d.first);
  }
  EXPECT_EQ(gate_.pending(), 6u);
  EXPECT_EQ(ask("alice:p9", "10.4.0.9", kT0).verdict, Verdict::kRateLimited);
  gate_.Cancelled();
  gate_.Cancelled();
  EXPECT_EQ(gate_.pending(), 4u);
  // 10.4.0.0 asked once: still quiet (two at once), then not.
  EXPECT_EQ(ask("alice:q1", "10.4.0.0", kT0 + 10s).verdict, Verdict::kCheck);
  auto busy = ask("alice:q2", "10.4.0.0", kT0 + 12s);
  EXPECT_EQ(busy.verdict, Verdict::kRateLimited) << "a busy source took a quiet place";
  EXPECT_EQ(busy.retry_after_seconds, 1);
  auto quiet = ask("alice:q3", "10.4.0.8", kT0 + 12s);
  EXPECT_EQ(quiet.verdict, Verdict::kCheck);
  EXPECT_TRUE(quiet.first);
  EXPECT_EQ(gate_.pending(), 6u);
}

TEST_F(AuthGateTest, CachesAreBounded) {
  AuthLimits limits;
  limits.max_failed = 8;
  limits.checks_per_second = limits.source_checks_per_second = 1e9;
  limits.check_burst = limits.source_check_burst = 1e9;
  AuthGate gate(BasicAuth(Users{{"alice", kAliceBcrypt}}), limits, kT0);
  for (int i = 0; i < 100; ++i) {
    auto d = gate.Admit(Basic("alice:" + std::to_string(i)), make_address("10.0.0.1"), kT0);
    ASSERT_EQ(d.verdict, Verdict::kCheck);
    gate.Checked(d.key, false);
    EXPECT_LE(gate.failed(), 8u);
  }
  // The newest are remembered, the oldest forgotten.
  EXPECT_EQ(gate.Admit(Basic("alice:99"), make_address("10.0.0.1"), kT0).verdict,
            Verdict::kKnownWrong);
  EXPECT_EQ(gate.Admit(Basic("alice:0"), make_address("10.0.0.1"), kT0).verdict, Verdict::kCheck);
}

}  // namespace
}  // namespace podnet::web
