#pragma once

// The iperf3 control protocol, as far as a TCP forward-direction test needs it: the constants,
// the cookie, JSON framing and the parameter and result documents. Pure functions; no sockets.
// Facts from the protocol's public behaviour (esnet/iperf src/iperf_api.h, iperf_api.c):
// states are one signed byte on the control connection, JSON documents are a 4-byte
// big-endian length followed by compact JSON without a terminating NUL.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace podnet::wire::iperf3 {

/// Control-connection states (iperf_api.h; unchanged from 3.12 to 3.21).
enum State : std::int8_t {
  kTestStart = 1,
  kTestRunning = 2,
  kTestEnd = 4,
  kParamExchange = 9,
  kCreateStreams = 10,
  kServerTerminate = 11,
  kClientTerminate = 12,
  kExchangeResults = 13,
  kDisplayResults = 14,
  kIperfDone = 16,
  kAccessDenied = -1,
  kServerError = -2,  // followed by two 4-byte big-endian ints: i_errno, errno
};
const char* StateName(std::int8_t s);

/// i_errno values a server sends with kServerError (iperf_error.h since IESERVERONLY = 3 was
/// inserted; checked against Debian's iperf3 3.12, which prints "test duration too long" for 5).
inline constexpr std::int32_t kErrDuration = 5;    // IEDURATION: test duration too long
inline constexpr std::int32_t kErrNumStreams = 6;  // IENUMSTREAMS: too many parallel streams

inline constexpr std::uint16_t kDefaultPort = 5201;
/// 36 characters of [a-z2-7] and a NUL, sent first on the control and on every data connection.
inline constexpr std::size_t kCookieSize = 37;
/// iperf3's default TCP block: 128 KiB per write()/read().
inline constexpr std::size_t kDefaultBlockSize = 128 * 1024;
/// The largest JSON document we accept (iperf3's results of 128 streams are ~20 KiB).
inline constexpr std::uint32_t kMaxJsonSize = 256 * 1024;
/// The version we claim in "client_version" (the oldest the issue tests against).
inline constexpr const char* kClientVersion = "3.12";

/// A fresh cookie: 36 random characters from "abcdefghijklmnopqrstuvwxyz234567" and a NUL.
std::string MakeCookie(std::mt19937_64& rng);
/// Whether 37 received bytes look like a cookie (36 alphabet characters and a NUL).
bool IsCookie(const std::string& bytes);

/// A JSON document framed for the wire: length (big-endian u32) + compact JSON.
std::string FrameJson(const nlohmann::json& doc);
/// The length from a 4-byte big-endian header.
std::uint32_t DecodeLength(const unsigned char header[4]);

/// Stream ids as iperf3 numbers them: 1, 3, 4, 5, … (2 is skipped for old versions' sake).
int StreamId(int index);

/// Ranges DecodeParams enforces, checked on the int64 value before anything narrows or adds it:
/// time and omit up to one day each (so time + omit cannot overflow an int), parallel up to
/// iperf3's MAX_STREAMS (iperf.h: 128), len up to iperf3's MAX_BLOCKSIZE (iperf.h: 1 MiB).
inline constexpr std::int64_t kMaxSeconds = 86400;
inline constexpr std::int64_t kMaxParallel = 128;
inline constexpr std::int64_t kMaxBlockSize = 1024 * 1024;

/// The client's test parameters (the subset we send or check).
struct Params {
  bool tcp = true;
  bool udp = false;
  bool sctp = false;
  bool reverse = false;
  bool bidirectional = false;
  int omit = 0;  // seconds
  int time = 0;  // seconds (0 with num/blockcount tests)
  std::uint64_t num = 0;
  std::uint64_t blockcount = 0;
  int parallel = 1;
  std::int64_t len = kDefaultBlockSize;
  std::string client_version;
};
nlohmann::json EncodeParams(const Params& p);
/// Parses and type-checks the parameter document as an iperf3 server does: unknown keys are
/// ignored; a known key of the wrong type, or an integer outside its range (time, omit: 0 to
/// kMaxSeconds; parallel: 1 to kMaxParallel; len: 1 to kMaxBlockSize; num, blockcount: 0 to
/// int64's maximum) — including one beyond int64 or a fraction — is an error (*error says which).
std::optional<Params> DecodeParams(const nlohmann::json& doc, std::string* error);

/// One stream's line of the results document.
struct StreamResult {
  int id = 0;
  std::uint64_t bytes = 0;
  std::int64_t retransmits = -1;  // -1: not known (receiver side)
  double start_time = 0;
  double end_time = 0;
};
/// The results document each side sends after EXCHANGE_RESULTS.
struct Results {
  double cpu_util_total = 0;  // percent of one CPU over the test
  double cpu_util_user = 0;
  double cpu_util_system = 0;
  int sender_has_retransmits = 0;  // 1 when the sender side reports retransmits, -1 unknown
  std::vector<StreamResult> streams;
};
nlohmann::json EncodeResults(const Results& r);
std::optional<Results> DecodeResults(const nlohmann::json& doc, std::string* error);

}  // namespace podnet::wire::iperf3
