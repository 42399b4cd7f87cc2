#include "exporter/wire/iperf3.h"

#include <gtest/gtest.h>

namespace podnet::wire {
namespace {

TEST(Iperf3Test, CookieIs36AlphabetCharactersAndANul) {
  std::mt19937_64 rng(1);
  std::string c = iperf3::MakeCookie(rng);
  ASSERT_EQ(c.size(), 37u);
  EXPECT_EQ(c.back(), '\0');
  EXPECT_TRUE(iperf3::IsCookie(c));
  EXPECT_NE(c, iperf3::MakeCookie(rng));
  std::string bad = c;
  bad[3] = '1';  // not in [a-z2-7]
  EXPECT_FALSE(iperf3::IsCookie(bad));
  EXPECT_FALSE(iperf3::IsCookie("GET / HTTP/1.1\r\nHost: x\r\n\r\n12345678"));
}

TEST(Iperf3Test, JsonFramingIsBigEndianLengthThenCompactJson) {
  std::string f = iperf3::FrameJson(nlohmann::json{{"tcp", true}});
  ASSERT_EQ(f.size(), 4u + 12u);
  EXPECT_EQ(f.substr(0, 4), std::string("\0\0\0\x0c", 4));
  EXPECT_EQ(f.substr(4), "{\"tcp\":true}");
  unsigned char h[4] = {0x00, 0x01, 0x02, 0x03};
  EXPECT_EQ(iperf3::DecodeLength(h), 0x010203u);
}

TEST(Iperf3Test, StreamIdsSkipTwo) {
  EXPECT_EQ(iperf3::StreamId(0), 1);
  EXPECT_EQ(iperf3::StreamId(1), 3);
  EXPECT_EQ(iperf3::StreamId(2), 4);
  EXPECT_EQ(iperf3::StreamId(7), 9);
}

TEST(Iperf3Test, ParamsAsIperf3SendsThem) {
  // What iperf3 3.12 `-c -t 2 -P 4` sends (key order and extra keys do not matter).
  auto doc = nlohmann::json::parse(
      R"({"tcp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":4,"len":131072,)"
      R"("pacing_timer":1000,"client_version":"3.12"})");
  std::string err;
  auto p = iperf3::DecodeParams(doc, &err);
  ASSERT_TRUE(p) << err;
  EXPECT_TRUE(p->tcp);
  EXPECT_FALSE(p->reverse);
  EXPECT_EQ(p->time, 2);
  EXPECT_EQ(p->parallel, 4);
  EXPECT_EQ(p->len, 131072);
  EXPECT_EQ(p->client_version, "3.12");
  // Round trip of what we send.
  iperf3::Params ours;
  ours.time = 3;
  ours.parallel = 8;
  auto back = iperf3::DecodeParams(iperf3::EncodeParams(ours), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->time, 3);
  EXPECT_EQ(back->parallel, 8);
  EXPECT_EQ(back->client_version, iperf3::kClientVersion);
}

TEST(Iperf3Test, ParamsTypeChecked) {
  std::string err;
  EXPECT_FALSE(iperf3::DecodeParams(nlohmann::json::parse(R"({"tcp":true,"len":0})"), &err));
  EXPECT_FALSE(iperf3::DecodeParams(nlohmann::json::parse(R"({"tcp":true,"parallel":0})"), &err));
  EXPECT_FALSE(iperf3::DecodeParams(nlohmann::json::parse(R"({"reverse":"yes"})"), &err));
  EXPECT_FALSE(iperf3::DecodeParams(nlohmann::json::parse(R"({"time":"2"})"), &err));
  EXPECT_FALSE(iperf3::DecodeParams(nlohmann::json::parse(R"([1,2])"), &err));
  auto udp = iperf3::DecodeParams(nlohmann::json::parse(R"({"udp":true,"time":1})"), &err);
  ASSERT_TRUE(udp);
  EXPECT_TRUE(udp->udp);
  auto rev = iperf3::DecodeParams(nlohmann::json::parse(R"({"tcp":true,"reverse":true})"), &err);
  ASSERT_TRUE(rev);
  EXPECT_TRUE(rev->reverse);
}

// The break test's inputs: each was accepted before (time + omit overflowed int; 4294967301
// narrowed to 5 s; 4294967312 streams to 16). Each is now refused, naming the key.
TEST(Iperf3Test, ParamsRangeCheckedAsInt64) {
  struct Case {
    const char* doc;
    const char* key;
  } cases[] = {
      {R"({"tcp":true,"time":1,"omit":2147483647})", "\"omit\""},
      {R"({"tcp":true,"time":4294967301})", "\"time\""},
      {R"({"tcp":true,"time":-1})", "\"time\""},
      {R"({"tcp":true,"time":2,"parallel":4294967312})", "\"parallel\""},
      {R"({"tcp":true,"time":2,"parallel":129})", "\"parallel\""},
      {R"({"tcp":true,"time":2,"len":4294967296})", "\"len\""},
      {R"({"tcp":true,"time":2,"len":-131072})", "\"len\""},
      {R"({"tcp":true,"num":18446744073709551615})", "\"num\""},
      {R"({"tcp":true,"blockcount":-1})", "\"blockcount\""},
      {R"({"tcp":true,"time":2.5})", "\"time\""},
      {R"({"tcp":true,"time":1e300})", "\"time\""},
  };
  for (const auto& c : cases) {
    std::string err;
    EXPECT_FALSE(iperf3::DecodeParams(nlohmann::json::parse(c.doc), &err)) << c.doc;
    EXPECT_NE(err.find(c.key), std::string::npos) << c.doc << ": " << err;
  }
  // The edges of each range are accepted, as a stock client sends them.
  std::string err;
  auto edge = iperf3::DecodeParams(
      nlohmann::json::parse(
          R"({"tcp":true,"time":86400,"omit":86400,"parallel":128,"len":1048576,"num":0,"blockcount":9223372036854775807})"),
      &err);
  ASSERT_TRUE(edge) << err;
  EXPECT_EQ(edge->time, 86400);
  EXPECT_EQ(edge->parallel, 128);
  EXPECT_EQ(edge->blockcount, 9223372036854775807ULL);
}

TEST(Iperf3Test, ResultsRoundTrip) {
  iperf3::Results r;
  r.cpu_util_total = 12.5;
  r.sender_has_retransmits = 1;
  r.streams = {{1, 1000, 2, 0, 2.0}, {3, 2000, 0, 0, 2.0}};
  std::string err;
  auto back = iperf3::DecodeResults(iperf3::EncodeResults(r), &err);
  ASSERT_TRUE(back) << err;
  ASSERT_EQ(back->streams.size(), 2u);
  EXPECT_EQ(back->streams[1].id, 3);
  EXPECT_EQ(back->streams[1].bytes, 2000u);
  EXPECT_EQ(back->streams[0].retransmits, 2);
  EXPECT_DOUBLE_EQ(back->cpu_util_total, 12.5);
  EXPECT_FALSE(iperf3::DecodeResults(nlohmann::json::parse(R"({"streams":[{"id":1}]})"), &err));
  EXPECT_FALSE(iperf3::DecodeResults(nlohmann::json::parse(R"({"cpu_util_total":1})"), &err));
}

TEST(Iperf3Test, ResultsBytesAsFloat) {
  // iperf3 writes integers, but a peer may send any JSON number: a float count is truncated, a
  // negative one is 0, and one beyond 2^64 (found by the iperf3_json fuzzer) is an error.
  std::string err;
  auto decode = [&](const char* bytes) {
    return iperf3::DecodeResults(
        nlohmann::json::parse(std::string(R"({"streams":[{"id":1,"bytes":)") + bytes + "}]}"),
        &err);
  };
  auto f = decode("1500.75");
  ASSERT_TRUE(f) << err;
  EXPECT_EQ(f->streams[0].bytes, 1500u);
  auto neg = decode("-5");
  ASSERT_TRUE(neg) << err;
  EXPECT_EQ(neg->streams[0].bytes, 0u);
  EXPECT_FALSE(decode("1234e56"));
  EXPECT_NE(err.find("beyond 2^64"), std::string::npos) << err;
  EXPECT_FALSE(decode("18446744073709551616.0"));
}

}  // namespace
}  // namespace podnet::wire
