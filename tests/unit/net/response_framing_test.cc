#include "exporter/net/response_framing.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace podnet::net::http_client {
namespace {

using Verdict = Head::Verdict;

// RFC 9112 2.2: CRLF or a bare LF ends a line, so "\n\n", "\r\n\n", "\n\r\n" and "\r\n\r\n" all
// end the header section; the start line itself is never taken for the empty line.
TEST(HeaderLengthTest, EndsAtTheFirstEmptyLineWhateverItsLineEnds) {
  EXPECT_EQ(HeaderLength("HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody"), 25u);
  EXPECT_EQ(HeaderLength("HTTP/1.1 200 OK\nA: b\n\nbody"), 22u);
  EXPECT_EQ(HeaderLength("HTTP/1.1 200 OK\r\nA: b\r\n\nbody"), 24u);
  EXPECT_EQ(HeaderLength("HTTP/1.1 200 OK\nA: b\n\r\nbody"), 23u);
  EXPECT_EQ(HeaderLength("HTTP/1.1 200 OK\r\nA: b\r\n"), std::nullopt);
  EXPECT_EQ(HeaderLength("HTTP/1.1 200 OK\r\nA: b\r\n\r"), std::nullopt);
  EXPECT_EQ(HeaderLength("\r\n"), std::nullopt);
  EXPECT_EQ(HeaderLength(""), std::nullopt);
}

TEST(NormalizeHeadTest, EveryLineEndsWithCrlf) {
  Head h = NormalizeHead("HTTP/1.1 200 OK\nA: b\r\nC: d\n e\n\n");
  EXPECT_EQ(h.verdict, Verdict::kOk);
  EXPECT_EQ(h.normalized, "HTTP/1.1 200 OK\r\nA: b\r\nC: d\r\n e\r\n\r\n");
  EXPECT_EQ(h.framing, BodyFraming::kUntilClose);
}

// RFC 9112 6.3 rule 3: Transfer-Encoding overrides Content-Length, whatever its value, and
// Beast (which refuses both together) is given the chunked field alone.
TEST(NormalizeHeadTest, ChunkedOverridesContentLength) {
  Head h = NormalizeHead(
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX: y\r\nTransfer-Encoding: Chunked\r\n"
      "content-length: 6, 7\r\n\t folded\r\n\r\n");
  EXPECT_EQ(h.verdict, Verdict::kOk);
  EXPECT_EQ(h.framing, BodyFraming::kChunked);
  EXPECT_EQ(h.normalized, "HTTP/1.1 200 OK\r\nX: y\r\nTransfer-Encoding: Chunked\r\n\r\n");
  // Empty list elements do not count (RFC 9110 5.6.1).
  EXPECT_EQ(NormalizeHead("HTTP/1.1 200 OK\r\nTransfer-Encoding: , chunked\r\n\r\n").framing,
            BodyFraming::kChunked);
}

// RFC 9110 8.6: the same length repeated, in fields or in a list, is that length.
TEST(NormalizeHeadTest, RepeatedIdenticalLengthsAreOne) {
  for (const char* head : {"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nContent-Length: 6\r\n\r\n",
                           "HTTP/1.1 200 OK\r\nContent-Length: 6, 6\r\n\r\n",
                           "HTTP/1.1 200 OK\r\nContent-Length:6\r\n\r\n"}) {
    Head h = NormalizeHead(head);
    EXPECT_EQ(h.verdict, Verdict::kOk) << head;
    EXPECT_EQ(h.framing, BodyFraming::kLength) << head;
    EXPECT_EQ(h.length, 6u) << head;
  }
}

TEST(NormalizeHeadTest, AmbiguousFramingIsRefused) {
  for (const char* head : {
           "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nContent-Length: 7\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 6, 7\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n , gzip\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 6\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n\r\n",
           "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
       }) {
    EXPECT_EQ(NormalizeHead(head).verdict, Verdict::kAmbiguous) << head;
  }
}

TEST(NormalizeHeadTest, ContentLengthThatIsNoNumberIsMalformed) {
  for (const char* head : {"HTTP/1.1 200 OK\r\nContent-Length: -6\r\n\r\n",
                           "HTTP/1.1 200 OK\r\nContent-Length: +6\r\n\r\n",
                           "HTTP/1.1 200 OK\r\nContent-Length: 0x6\r\n\r\n",
                           "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
                           "HTTP/1.1 200 OK\r\nContent-Length: 6, \r\n\r\n",
                           "HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456789\r\n\r\n"}) {
    EXPECT_EQ(NormalizeHead(head).verdict, Verdict::kMalformed) << head;
  }
}

// Feeds `body` one byte at a time and in one piece; both must agree.
ChunkedDecoder::Status Decode(std::string_view body, std::size_t* used, std::uint64_t* data) {
  ChunkedDecoder whole;
  auto status = whole.Feed(body, used);
  ChunkedDecoder bytewise;
  std::size_t total = 0;
  auto s = ChunkedDecoder::Status::kMore;
  for (std::size_t i = 0; i < body.size() && s == ChunkedDecoder::Status::kMore; ++i) {
    std::size_t n = 0;
    s = bytewise.Feed(body.substr(i, 1), &n);
    total += n;
  }
  EXPECT_EQ(s, status) << body;
  if (status != ChunkedDecoder::Status::kMalformed) {
    EXPECT_EQ(total, *used) << body;
  }
  *data = whole.announced();
  return status;
}

TEST(ChunkedDecoderTest, TakesBareLfLinesExtensionsAndTrailers) {
  struct Case {
    const char* body;
    std::uint64_t data;
  };
  for (auto c :
       {Case{"6\r\npodnet\r\n0\r\n\r\nNEXT", 6}, Case{"6\npodnet\r\n0\n\nNEXT", 6},
        Case{"6;a=b\npodnet\r\n0\n\r\nNEXT", 6}, Case{"6 ; a=\"x\"\r\npodnet\r\n0\r\n\r\nNEXT", 6},
        Case{"A\r\n0123456789\r\n2\r\nab\r\n0\r\nX-T: 1\nY: 2\r\n\r\nNEXT", 12},
        Case{"0\r\n\r\nNEXT", 0}}) {
    std::size_t used = 0;
    std::uint64_t data = 0;
    EXPECT_EQ(Decode(c.body, &used, &data), ChunkedDecoder::Status::kDone) << c.body;
    EXPECT_EQ(std::string_view(c.body).substr(used), "NEXT") << c.body;
    EXPECT_EQ(data, c.data) << c.body;
  }
}

TEST(ChunkedDecoderTest, WaitsForMore) {
  std::size_t used = 0;
  std::uint64_t data = 0;
  EXPECT_EQ(Decode("6\r\npod", &used, &data), ChunkedDecoder::Status::kMore);
  EXPECT_EQ(used, 6u);
  EXPECT_EQ(Decode("6\r\npodnet\r\n0\r\nX: y\r\n", &used, &data), ChunkedDecoder::Status::kMore);
}

// python's http.client and Go read the 2 bytes after chunk data as CRLF: a bare LF there, a
// bare CR, no size, a size that overflows, or a line over kMaxHeaderBytes is not the coding.
TEST(ChunkedDecoderTest, RefusesWhatPythonAndGoRefuse) {
  for (std::string body :
       {std::string("6\r\npodnet\n0\r\n\r\n"), std::string("6\r\npodnetX\r\n"), std::string("\r\n"),
        std::string("x\r\n"), std::string("6x\r\n"), std::string("6\r;\n"),
        std::string("0\r\nA: b\rc\r\n\r\n"), std::string("11111111111111111\r\n"),
        "6;" + std::string(kMaxHeaderBytes, 'a') + "\r\n",
        "0\r\nA: " + std::string(kMaxHeaderBytes, 'a') + "\r\n\r\n"}) {
    std::size_t used = 0;
    std::uint64_t data = 0;
    EXPECT_EQ(Decode(body, &used, &data), ChunkedDecoder::Status::kMalformed) << body;
  }
}

}  // namespace
}  // namespace podnet::net::http_client
