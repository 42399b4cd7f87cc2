#include "exporter/config/units.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "exporter/config/env.h"
#include "tests/unit/testing/param_name.h"

namespace podnet::config {
namespace {

using namespace std::chrono_literals;
using podnet::testing::ParamName;

// --------------------------------------------------------------------------------------------
// ParseDuration / FormatDuration

struct DurationCase {
  std::string text;
  std::optional<Duration> want;
};

void PrintTo(const DurationCase& c, std::ostream* os) { *os << '"' << c.text << '"'; }

class ParseDurationTest : public ::testing::TestWithParam<DurationCase> {};

TEST_P(ParseDurationTest, Parses) {
  const auto& c = GetParam();
  auto got = ParseDuration(c.text);
  ASSERT_EQ(got.has_value(), c.want.has_value())
      << "\"" << c.text << "\" gave " << (got ? FormatDuration(*got) : "nullopt");
  if (c.want) {
    EXPECT_EQ(got->count(), c.want->count()) << c.text;
  }
}

constexpr std::int64_t kDay = 24LL * 3600 * 1'000'000'000;

INSTANTIATE_TEST_SUITE_P(
    Table, ParseDurationTest,
    ::testing::Values(
        // Valid: one term per unit, combinations in decreasing order, zero.
        DurationCase{"0", Duration::zero()}, DurationCase{"0s", Duration::zero()},
        DurationCase{"50ms", 50ms}, DurationCase{"250us", 250us}, DurationCase{"7ns", 7ns},
        DurationCase{"10s", 10s}, DurationCase{"15m", 15min}, DurationCase{"2h", 2h},
        DurationCase{"1h30m", 90min}, DurationCase{"1m30s", 90s}, DurationCase{"1s500ms", 1500ms},
        DurationCase{"1m1ms", 60001ms}, DurationCase{"1d", Duration(kDay)},
        DurationCase{"1w", Duration(7 * kDay)}, DurationCase{"1y", Duration(365 * kDay)},
        DurationCase{"1y2w3d4h5m6s7ms8us9ns", Duration(365 * kDay + 14 * kDay + 3 * kDay) + 4h +
                                                  5min + 6s + 7ms + 8us + 9ns},
        DurationCase{"0050ms", 50ms},
        // The largest representable count of nanoseconds, and one past it.
        DurationCase{"9223372036854775807ns", Duration(std::numeric_limits<std::int64_t>::max())},
        DurationCase{"9223372036854775808ns", std::nullopt},
        DurationCase{"292y", Duration(292 * 365 * kDay)},
        DurationCase{"293y", std::nullopt},  // 9.24e18 ns > int64
        DurationCase{"292y1000d", std::nullopt},
        DurationCase{"99999999999999999999s", std::nullopt},
        // Invalid text.
        DurationCase{"", std::nullopt}, DurationCase{"1.5s", std::nullopt},
        DurationCase{"-1s", std::nullopt}, DurationCase{"+1s", std::nullopt},
        DurationCase{"1s1m", std::nullopt}, DurationCase{"1s1s", std::nullopt},
        DurationCase{"1ms1s", std::nullopt}, DurationCase{"10", std::nullopt},
        DurationCase{"ms", std::nullopt}, DurationCase{"s", std::nullopt},
        DurationCase{"1 s", std::nullopt}, DurationCase{" 1s", std::nullopt},
        DurationCase{"1s ", std::nullopt}, DurationCase{"1S", std::nullopt},
        DurationCase{"1sec", std::nullopt}, DurationCase{"1µs", std::nullopt},
        DurationCase{"1h30", std::nullopt}, DurationCase{"00", std::nullopt}),
    [](const auto& info) { return ParamName(info.index, info.param.text); });

struct FormatCase {
  Duration d;
  std::string want;
};

void PrintTo(const FormatCase& c, std::ostream* os) { *os << '"' << c.want << '"'; }

class FormatDurationTest : public ::testing::TestWithParam<FormatCase> {};

TEST_P(FormatDurationTest, FormatsAndRoundTrips) {
  const auto& c = GetParam();
  EXPECT_EQ(FormatDuration(c.d), c.want);
  auto back = ParseDuration(FormatDuration(c.d));
  ASSERT_TRUE(back.has_value()) << FormatDuration(c.d);
  EXPECT_EQ(back->count(), c.d.count());
}

INSTANTIATE_TEST_SUITE_P(
    Table, FormatDurationTest,
    ::testing::Values(FormatCase{Duration::zero(), "0s"}, FormatCase{50ms, "50ms"},
                      FormatCase{250us, "250us"}, FormatCase{1ns, "1ns"}, FormatCase{10s, "10s"},
                      FormatCase{90s, "1m30s"}, FormatCase{90min, "1h30m"},
                      FormatCase{1950ms, "1s950ms"}, FormatCase{60001ms, "1m1ms"},
                      FormatCase{Duration(8 * kDay), "8d"},
                      FormatCase{Duration(kDay) + 1h + 1min + 1s + 1ms + 1us + 1ns,
                                 "1d1h1m1s1ms1us1ns"}),
    [](const auto& info) { return ParamName(info.index, info.param.want); });

TEST(DurationTest, RoundTripsManyValues) {
  // Every value ParseDuration can produce formats back to text that parses to the same value.
  std::int64_t v = 1;
  for (int i = 0; i < 60; ++i, v = v * 2 + (i % 3)) {
    Duration d(v);
    auto back = ParseDuration(FormatDuration(d));
    ASSERT_TRUE(back.has_value()) << v << " -> " << FormatDuration(d);
    EXPECT_EQ(back->count(), v) << FormatDuration(d);
  }
  for (const char* text : {"1h30m", "50ms", "250us", "15m", "1d12h", "3w", "1y"}) {
    auto d = ParseDuration(text);
    ASSERT_TRUE(d.has_value()) << text;
    EXPECT_EQ(ParseDuration(FormatDuration(*d)), d) << text;
  }
}

// --------------------------------------------------------------------------------------------
// ParseSize

struct SizeCase {
  std::string text;
  std::optional<std::uint64_t> want;
};

void PrintTo(const SizeCase& c, std::ostream* os) { *os << '"' << c.text << '"'; }

class ParseSizeTest : public ::testing::TestWithParam<SizeCase> {};

TEST_P(ParseSizeTest, Parses) {
  const auto& c = GetParam();
  auto got = ParseSize(c.text);
  ASSERT_EQ(got.has_value(), c.want.has_value()) << '"' << c.text << '"';
  if (c.want) {
    EXPECT_EQ(*got, *c.want) << c.text;
  }
}

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

INSTANTIATE_TEST_SUITE_P(
    Table, ParseSizeTest,
    ::testing::Values(SizeCase{"0", 0}, SizeCase{"1", 1}, SizeCase{"512B", 512},
                      SizeCase{"1kB", 1000}, SizeCase{"1KiB", 1024}, SizeCase{"3MB", 3'000'000},
                      SizeCase{"3MiB", 3 * 1048576ULL}, SizeCase{"20GB", 20'000'000'000ULL},
                      SizeCase{"20 GB", 20'000'000'000ULL}, SizeCase{"20GiB", 20ULL << 30},
                      SizeCase{"2TB", 2'000'000'000'000ULL}, SizeCase{"2TiB", 2ULL << 40},
                      SizeCase{"18446744073709551615", kMax},
                      SizeCase{"18446744073709551615B", kMax},
                      SizeCase{"18014398509481983KiB", kMax - 1023},  // (2^54 - 1) * 2^10
                      // Overflow of 64 bits, in the digits or in the multiplication.
                      SizeCase{"18446744073709551616", std::nullopt},
                      SizeCase{"18014398509481984KiB", std::nullopt},  // exactly 2^64
                      SizeCase{"18446744073709552GB", std::nullopt},
                      // Bad text.
                      SizeCase{"", std::nullopt}, SizeCase{"GB", std::nullopt},
                      SizeCase{"1.5GB", std::nullopt}, SizeCase{"-1", std::nullopt},
                      SizeCase{"+1", std::nullopt}, SizeCase{"1gb", std::nullopt},
                      SizeCase{"1KB", std::nullopt}, SizeCase{"1kiB", std::nullopt},
                      SizeCase{"1G", std::nullopt}, SizeCase{"20  GB", std::nullopt},
                      SizeCase{"20GB ", std::nullopt}, SizeCase{" 20GB", std::nullopt},
                      SizeCase{"1 B B", std::nullopt}, SizeCase{"1GB1MB", std::nullopt}),
    [](const auto& info) { return ParamName(info.index, info.param.text); });

// --------------------------------------------------------------------------------------------
// ExpandEnv

EnvLookup Env() {
  static const std::map<std::string, std::string> kVars = {
      {"POD_NAME", "probe-7"}, {"EMPTY", ""}, {"_x1", "u"}, {"DOLLAR", "$X"}};
  return [](const std::string& name) -> std::optional<std::string> {
    auto it = kVars.find(name);
    if (it == kVars.end()) return std::nullopt;
    return it->second;
  };
}

struct ExpandCase {
  std::string in;
  std::optional<std::string> want;
  std::string error_fragment;  // for failures
};

void PrintTo(const ExpandCase& c, std::ostream* os) { *os << '"' << c.in << '"'; }

ExpandCase Ok(std::string in, std::string want) { return {std::move(in), std::move(want), ""}; }
ExpandCase Err(std::string in, std::string fragment) {
  return {std::move(in), std::nullopt, std::move(fragment)};
}

class ExpandEnvTest : public ::testing::TestWithParam<ExpandCase> {};

TEST_P(ExpandEnvTest, Expands) {
  const auto& c = GetParam();
  std::string error;
  auto got = ExpandEnv(c.in, Env(), &error);
  ASSERT_EQ(got.has_value(), c.want.has_value()) << '"' << c.in << "\" error: " << error;
  if (c.want) {
    EXPECT_EQ(*got, *c.want);
  } else {
    EXPECT_NE(error.find(c.error_fragment), std::string::npos) << error;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, ExpandEnvTest,
    ::testing::Values(Ok("", ""), Ok("plain", "plain"), Ok("${POD_NAME}", "probe-7"),
                      Ok("a-${POD_NAME}-b", "a-probe-7-b"),
                      Ok("${POD_NAME}${POD_NAME}", "probe-7probe-7"), Ok("${UNSET}", ""),
                      Ok("x${UNSET}y", "xy"), Ok("${UNSET:-fallback}", "fallback"),
                      Ok("${EMPTY:-fallback}", "fallback"),  // as the shell's :- does
                      Ok("${EMPTY}", ""), Ok("${POD_NAME:-fallback}", "probe-7"),
                      Ok("${UNSET:-}", ""), Ok("${UNSET:-a b:c}", "a b:c"), Ok("${_x1}", "u"),
                      // The value of a variable is not expanded again.
                      Ok("${DOLLAR}", "$X"), Ok("$$", "$"), Ok("$${POD_NAME}", "${POD_NAME}"),
                      Ok("$$$$", "$$"), Ok("cost: 5$", "cost: 5$"), Ok("$POD_NAME", "$POD_NAME"),
                      // Errors.
                      Err("${", "unterminated"),
                      Err("${POD_NAME", "unterminated \"${\" in \"${POD_NAME\""),
                      Err("ok ${POD_NAME} then ${", "unterminated"),
                      Err("${}", "bad environment variable name \"\""),
                      Err("${1ABC}", "bad environment variable name \"1ABC\""),
                      Err("${POD-NAME}", "bad environment variable name \"POD-NAME\""),
                      Err("${:-x}", "bad environment variable name"),
                      Err("${A B}", "bad environment variable name \"A B\"")),
    [](const auto& info) { return ParamName(info.index, info.param.in); });

TEST(ExpandEnvTest, ProcessEnvReadsTheEnvironment) {
  ASSERT_EQ(setenv("PODNET_UNITS_TEST_VAR", "from-env", 1), 0);
  unsetenv("PODNET_UNITS_TEST_UNSET");
  std::string error;
  EXPECT_EQ(
      ExpandEnv("${PODNET_UNITS_TEST_VAR}/${PODNET_UNITS_TEST_UNSET:-d}", ProcessEnv(), &error),
      "from-env/d");
  unsetenv("PODNET_UNITS_TEST_VAR");
}

}  // namespace
}  // namespace podnet::config
