#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace podnet::net::http_client {

/// How an HTTP/1.1 response's header section and body are delimited, read as curl and python's
/// http.client read them (docs/probes.md, "Response framing"; RFC 9112 §2.2, §6, §7.1). The
/// status line and the fields themselves are left to Beast's parser; these functions find the
/// header's end, give Beast one spelling of it, and decide how long the body is.

/// The longest header section read (start line to the empty line, as received): longer is
/// malformed_response.
inline constexpr std::size_t kMaxHeaderBytes = 8192;

/// The length of the header section at the start of `data`: up to and including the empty
/// line that ends it. A line ends with CRLF or with a bare LF (RFC 9112 §2.2: "a recipient MAY
/// recognize a single LF as a line terminator and ignore any preceding CR"; curl, python and Go
/// do). nullopt: no empty line in `data` yet.
std::optional<std::size_t> HeaderLength(std::string_view data);

/// How the body ends (RFC 9112 §6.3).
enum class BodyFraming {
  kLength,      // Content-Length bytes
  kChunked,     // the chunked transfer coding (ChunkedDecoder)
  kUntilClose,  // at the server's close
};

/// A header section made ready for Beast's parser, or why the response is refused.
struct Head {
  enum class Verdict {
    kOk,
    kMalformed,  // a Content-Length value that is not a decimal number
    kAmbiguous,  // framing that clients read differently, or that the RFC calls faulty
  };
  Verdict verdict = Verdict::kOk;
  /// The header section with every line ending in CRLF and, for a chunked body, without its
  /// Content-Length fields (RFC 9112 §6.3 rule 3: "If a message is received with both a
  /// Transfer-Encoding and a Content-Length header field, the Transfer-Encoding overrides the
  /// Content-Length"). Empty unless kOk.
  std::string normalized;
  BodyFraming framing = BodyFraming::kUntilClose;
  std::uint64_t length = 0;  // kLength: the body's bytes
};

/// Reads the framing fields of a header section `head` (as HeaderLength delimits it; it must
/// end with its empty line). Rules, in RFC 9112 §6.3's order for a response:
///  - any Transfer-Encoding in an HTTP/1.0 response: kAmbiguous (§6.1: "MUST treat the message
///    as if the framing is faulty, even if a Content-Length is present");
///  - Transfer-Encoding whose codings, over every such field, are exactly `chunked`: kChunked;
///    Content-Length fields are dropped, whatever their values (§6.3 rule 3);
///  - any other Transfer-Encoding (`gzip, chunked`, `chunked, chunked`, `gzip`, two fields):
///    kAmbiguous. §6.1: "A sender MUST NOT apply the chunked transfer coding more than once to a
///    message body"; the probe asks for no other coding (it sends no TE field, RFC 9110
///    §10.1.4), and curl, python and Go frame or refuse such bodies each their own way;
///  - Content-Length fields: every comma-separated element 1*DIGIT (else kMalformed), all the
///    same number (RFC 9110 §8.6: a recipient MAY "replace that invalid field value with a
///    single instance of the decimal value"; else kAmbiguous, §6.3 rule 5: "the message
///    framing is invalid"): kLength;
///  - neither: kUntilClose (§6.3 rule 8).
/// Bodies that responses to GET never have (1xx, 204, 304: §6.3 rule 1) are the caller's
/// concern: the status is Beast's to parse.
Head NormalizeHead(std::string_view head);

/// Decodes the chunked transfer coding (RFC 9112 §7.1) as it arrives, keeping none of the
/// data: counts it. Lenient where curl, python and Go all are (§7.1's grammar writes CRLF, and
/// §2.2's bare-LF leniency names only the start-line and fields): a chunk-size line, the last
/// chunk's line and trailer lines may end with a bare LF, and a chunk extension is skipped
/// unread. Strict where python and Go are: the CRLF after chunk data must be CRLF. Bounded: a
/// chunk-size line or the trailer section longer than kMaxHeaderBytes is malformed.
class ChunkedDecoder {
 public:
  enum class Status {
    kMore,       // every byte given was consumed; the body goes on
    kDone,       // the body ended: `consumed` bytes were the rest of it
    kMalformed,  // not the chunked coding
  };
  /// Consumes the next bytes of the body; `*consumed` is set to how many were part of it.
  Status Feed(std::string_view in, std::size_t* consumed);
  /// The chunk sizes announced so far (bytes of data, including what is still to come).
  std::uint64_t announced() const { return announced_; }

 private:
  enum class State { kSize, kExtension, kData, kDataCr, kDataLf, kTrailer };
  // One step of the state machine at in[i] (i < in.size()), moving i past what it consumed:
  // kMore to go on, kDone (the body's last byte was in[i - 1]) or kMalformed (at in[i]).
  Status Step(std::string_view in, std::size_t& i);
  // The steps by state, for the byte c = in[i]: a chunk-size line's hex digits, the rest of the
  // line (a chunk extension, skipped), a byte of the trailer section.
  Status SizeDigit(char c, std::size_t& i);
  Status SizeLineEnd(char c, std::size_t& i);
  Status TrailerByte(char c, std::size_t& i);
  State state_ = State::kSize;
  std::uint64_t size_ = 0;        // the chunk being read: its size, then what is left of it
  bool digits_ = false;           // kSize: a hex digit was read
  bool cr_ = false;               // the last byte of this line was CR
  std::size_t line_ = 0;          // bytes in the current chunk-size line
  std::size_t trailer_ = 0;       // bytes of the trailer section
  std::size_t trailer_line_ = 0;  // bytes in the current trailer line
  std::uint64_t announced_ = 0;
};

}  // namespace podnet::net::http_client
