// GET /podnet/info's body for any name: valid JSON, never an exception (break test: a name with
// a byte 0xff made the endpoint answer 500, nlohmann's type_error.316).
#include "exporter/app/info.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace podnet::app {
namespace {

nlohmann::json Parse(const std::string& body) {
  EXPECT_EQ(body.back(), '\n');
  return nlohmann::json::parse(body);  // throws (fails the test) unless valid UTF-8 JSON
}

TEST(InfoJsonTest, NamesAsTheyAre) {
  auto j = Parse(InfoJson("probe-a", "node-1", "zone-a"));
  EXPECT_EQ(j["name"], "probe-a");
  EXPECT_EQ(j["node"], "node-1");
  EXPECT_EQ(j["zone"], "zone-a");
  EXPECT_TRUE(j["version"].is_string());
  EXPECT_TRUE(j["revision"].is_string());
}

TEST(InfoJsonTest, BytesThatAreNotUtf8BecomeTheReplacementCharacter) {
  const std::string bad[] = {"peer-\xff", "\xc3", "\xed\xa0\x80", "ok\xe2\x82", "\x80zone"};
  for (const auto& name : bad) {
    std::string body;
    ASSERT_NO_THROW(body = InfoJson(name, "node-\xfe", "zone"));
    auto j = Parse(body);
    EXPECT_NE(j["name"].get<std::string>().find("\xef\xbf\xbd"), std::string::npos) << body;
    EXPECT_EQ(j["node"], "node-\xef\xbf\xbd");
  }
  EXPECT_EQ(Parse(InfoJson("peer-\xff", "n", "z"))["name"], "peer-\xef\xbf\xbd");
}

TEST(InfoJsonTest, ControlCharactersAreEscaped) {
  const std::string name("a\x01\n\"\\\0b", 8);
  std::string body = InfoJson(name, "n", "z");
  EXPECT_EQ(body.find('\x01'), std::string::npos);
  EXPECT_EQ(body.find('\n'), body.size() - 1);  // only the final newline
  EXPECT_EQ(Parse(body)["name"], name);         // round-trips, NUL included
}

}  // namespace
}  // namespace podnet::app
