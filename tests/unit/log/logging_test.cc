#include "exporter/log/logging.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace podnet::log {
namespace {

using Fields = std::vector<LogField>;

TEST(LoggingTest, TrailingKeyValueWordsAreFields) {
  Fields f;
  EXPECT_EQ(SplitFields("dns lookup name=a.example resolver=glibc queries=6", &f), "dns lookup");
  EXPECT_EQ(f, (Fields{{"name", "a.example"}, {"resolver", "glibc"}, {"queries", "6"}}));
  // Only the trailing run: a key=value word inside the text stays text.
  EXPECT_EQ(SplitFields("set a=1 then done", &f), "set a=1 then done");
  EXPECT_TRUE(f.empty());
  // Not fields: no key, no value, a value with '=', reserved keys, a key that is no identifier,
  // and the first word (a record always has a message).
  for (const char* m :
       {"x =1", "x a=", "x a=b=c", "x msg=1", "x level=2", "x ts=3", "x 1a=2", "x a-b=1", "a=1"}) {
    EXPECT_EQ(SplitFields(m, &f), m);
    EXPECT_TRUE(f.empty()) << m;
  }
  EXPECT_EQ(SplitFields("", &f), "");
}

TEST(LoggingTest, JsonPutsFieldsInTheirOwnMembersAndLogfmtAfterMsg) {
  auto t = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'700'000'000'123));
  std::string line = FormatRecord(Format::kJson, spdlog::level::debug, t,
                                  "dns lookup name=a.example result=nxdomain queries=6");
  ASSERT_EQ(line.back(), '\n');
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["ts"], "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(j["level"], "debug");
  EXPECT_EQ(j["msg"], "dns lookup");
  EXPECT_EQ(j["name"], "a.example");
  EXPECT_EQ(j["result"], "nxdomain");
  EXPECT_EQ(j["queries"], "6");
  EXPECT_EQ(j.size(), 6u);

  EXPECT_EQ(FormatRecord(Format::kLogfmt, spdlog::level::info, t, "burst done peer=lo streams=4"),
            "ts=2023-11-14T22:13:20.123Z level=info msg=\"burst done\" peer=lo streams=4\n");
  // A message without fields is one msg, as before.
  j = nlohmann::json::parse(FormatRecord(Format::kJson, spdlog::level::warn, t, "a b c"));
  EXPECT_EQ(j["msg"], "a b c");
  EXPECT_EQ(j.size(), 3u);
}

}  // namespace
}  // namespace podnet::log
