#include "exporter/wire/iperf3.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <type_traits>

namespace podnet::wire::iperf3 {
namespace {

constexpr std::string_view kCookieAlphabet = "abcdefghijklmnopqrstuvwxyz234567";
constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();

// Type checks of known keys, as the reference server does them: booleans must be JSON true or
// false, numbers must be numbers.
bool GetBool(const nlohmann::json& doc, const char* key, bool* out, std::string* error) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return true;
  if (it->is_boolean()) {
    *out = it->get<bool>();
    return true;
  }
  // Old clients send 1 for true.
  if (it->is_number_integer()) {
    *out = it->get<std::int64_t>() != 0;
    return true;
  }
  *error = std::string("parameter \"") + key + "\" must be a boolean";
  return false;
}

// A known integer key, range-checked as int64 before anything narrows it or adds to it: a
// value outside [lo, hi], a fraction, or an integer beyond int64 is an error that names the key.
bool GetInt(const nlohmann::json& doc, const char* key, std::int64_t lo, std::int64_t hi,
            std::int64_t* out, std::string* error) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return true;
  auto range = [&] {
    *error = std::string("parameter \"") + key + "\" must be an integer from " +
             std::to_string(lo) + " to " + std::to_string(hi) + ", got " + it->dump();
    return false;
  };
  if (!it->is_number()) {
    *error = std::string("parameter \"") + key + "\" must be a number";
    return false;
  }
  std::int64_t v = 0;
  if (it->is_number_unsigned()) {
    std::uint64_t u = it->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return range();
    v = static_cast<std::int64_t>(u);
  } else if (it->is_number_integer()) {
    v = it->get<std::int64_t>();
  } else {
    // A float: only an integral value well inside int64 (iperf3's cJSON writes integers).
    double d = it->get<double>();
    if (!(d >= -9.0e15 && d <= 9.0e15) || d != std::trunc(d)) return range();
    v = static_cast<std::int64_t>(d);
  }
  if (v < lo || v > hi) return range();
  *out = v;
  return true;
}

template <typename T>
bool GetInt(const nlohmann::json& doc, const char* key, std::int64_t lo, std::int64_t hi, T* out,
            std::string* error) {
  static_assert(std::is_integral_v<T>);
  std::int64_t v = static_cast<std::int64_t>(*out);
  if (!GetInt(doc, key, lo, hi, &v, error)) return false;
  *out = static_cast<T>(v);  // within [lo, hi], which the caller chose to fit T
  return true;
}

}  // namespace

const char* StateName(std::int8_t s) {
  switch (s) {
    case kTestStart:
      return "TEST_START";
    case kTestRunning:
      return "TEST_RUNNING";
    case kTestEnd:
      return "TEST_END";
    case kParamExchange:
      return "PARAM_EXCHANGE";
    case kCreateStreams:
      return "CREATE_STREAMS";
    case kServerTerminate:
      return "SERVER_TERMINATE";
    case kClientTerminate:
      return "CLIENT_TERMINATE";
    case kExchangeResults:
      return "EXCHANGE_RESULTS";
    case kDisplayResults:
      return "DISPLAY_RESULTS";
    case kIperfDone:
      return "IPERF_DONE";
    case kAccessDenied:
      return "ACCESS_DENIED";
    case kServerError:
      return "SERVER_ERROR";
    default:
      return "unknown state";
  }
}

std::string MakeCookie(std::mt19937_64& rng) {
  std::string c(kCookieSize, '\0');
  std::uniform_int_distribution<std::size_t> pick(0, kCookieAlphabet.size() - 1);
  for (std::size_t i = 0; i + 1 < kCookieSize; ++i) c[i] = kCookieAlphabet[pick(rng)];
  return c;
}

bool IsCookie(const std::string& bytes) {
  if (bytes.size() != kCookieSize || bytes.back() != '\0') return false;
  return std::all_of(bytes.begin(), bytes.end() - 1,
                     [](char ch) { return kCookieAlphabet.find(ch) != std::string_view::npos; });
}

std::string FrameJson(const nlohmann::json& doc) {
  std::string body = doc.dump();
  auto n = static_cast<std::uint32_t>(body.size());
  std::string out;
  out.reserve(4 + body.size());
  out.push_back(static_cast<char>(n >> 24));
  out.push_back(static_cast<char>(n >> 16));
  out.push_back(static_cast<char>(n >> 8));
  out.push_back(static_cast<char>(n));
  out += body;
  return out;
}

std::uint32_t DecodeLength(const unsigned char h[4]) {
  return (std::uint32_t{h[0]} << 24) | (std::uint32_t{h[1]} << 16) | (std::uint32_t{h[2]} << 8) |
         std::uint32_t{h[3]};
}

int StreamId(int index) { return index == 0 ? 1 : index + 2; }

nlohmann::json EncodeParams(const Params& p) {
  nlohmann::json j{
      {"tcp", true},
      {"omit", p.omit},
      {"time", p.time},
      {"num", p.num},
      {"blockcount", p.blockcount},
      {"parallel", p.parallel},
      {"len", p.len},
      {"client_version", p.client_version.empty() ? kClientVersion : p.client_version}};
  return j;
}

std::optional<Params> DecodeParams(const nlohmann::json& doc, std::string* error) {
  if (!doc.is_object()) {
    *error = "parameters must be a JSON object";
    return std::nullopt;
  }
  Params p;
  p.tcp = false;
  bool ok = GetBool(doc, "tcp", &p.tcp, error) && GetBool(doc, "udp", &p.udp, error) &&
            GetBool(doc, "sctp", &p.sctp, error) && GetBool(doc, "reverse", &p.reverse, error) &&
            GetBool(doc, "bidirectional", &p.bidirectional, error) &&
            GetInt(doc, "omit", 0, kMaxSeconds, &p.omit, error) &&
            GetInt(doc, "time", 0, kMaxSeconds, &p.time, error) &&
            GetInt(doc, "num", 0, kMaxInt64, &p.num, error) &&
            GetInt(doc, "blockcount", 0, kMaxInt64, &p.blockcount, error) &&
            GetInt(doc, "parallel", 1, kMaxParallel, &p.parallel, error) &&
            GetInt(doc, "len", 1, kMaxBlockSize, &p.len, error);
  if (!ok) return std::nullopt;
  if (auto it = doc.find("client_version"); it != doc.end() && it->is_string()) {
    p.client_version = it->get<std::string>();
  }
  if (!p.tcp && !p.udp && !p.sctp) p.tcp = true;  // TCP is the default protocol
  return p;
}

nlohmann::json EncodeResults(const Results& r) {
  nlohmann::json streams = nlohmann::json::array();
  for (const auto& s : r.streams) {
    streams.push_back({{"id", s.id},
                       {"bytes", s.bytes},
                       {"retransmits", s.retransmits},
                       {"jitter", 0},
                       {"errors", 0},
                       {"omitted_errors", 0},
                       {"packets", 0},
                       {"omitted_packets", 0},
                       {"start_time", s.start_time},
                       {"end_time", s.end_time}});
  }
  return nlohmann::json{{"cpu_util_total", r.cpu_util_total},
                        {"cpu_util_user", r.cpu_util_user},
                        {"cpu_util_system", r.cpu_util_system},
                        {"sender_has_retransmits", r.sender_has_retransmits},
                        {"streams", std::move(streams)}};
}

std::optional<Results> DecodeResults(const nlohmann::json& doc, std::string* error) {
  if (!doc.is_object()) {
    *error = "results must be a JSON object";
    return std::nullopt;
  }
  Results r;
  auto num = [&](const nlohmann::json& o, const char* key, double* out) {
    auto it = o.find(key);
    if (it != o.end() && it->is_number()) *out = it->get<double>();
  };
  num(doc, "cpu_util_total", &r.cpu_util_total);
  num(doc, "cpu_util_user", &r.cpu_util_user);
  num(doc, "cpu_util_system", &r.cpu_util_system);
  if (auto it = doc.find("sender_has_retransmits"); it != doc.end() && it->is_number_integer()) {
    r.sender_has_retransmits = it->get<int>();
  }
  auto streams = doc.find("streams");
  if (streams == doc.end() || !streams->is_array()) {
    *error = "results have no \"streams\" array";
    return std::nullopt;
  }
  for (const auto& s : *streams) {
    if (!s.is_object() || !s.contains("id") || !s["id"].is_number_integer() ||
        !s.contains("bytes") || !s["bytes"].is_number()) {
      *error = "a stream result lacks a numeric \"id\" or \"bytes\"";
      return std::nullopt;
    }
    StreamResult sr;
    sr.id = s["id"].get<int>();
    if (s["bytes"].is_number_unsigned()) {
      sr.bytes = s["bytes"].get<std::uint64_t>();
    } else {
      // A float (or negative) count from a broken or hostile peer: below 0 is 0; at or beyond
      // 2^64 it is no count at all (converting it would be undefined behaviour).
      double b = s["bytes"].get<double>();
      if (!(b < 18446744073709551616.0)) {
        *error = "a stream result's \"bytes\" is beyond 2^64";
        return std::nullopt;
      }
      sr.bytes = static_cast<std::uint64_t>(std::max(0.0, b));
    }
    if (auto it = s.find("retransmits"); it != s.end() && it->is_number_integer()) {
      sr.retransmits = it->get<std::int64_t>();
    }
    double st = 0, et = 0;
    num(s, "start_time", &st);
    num(s, "end_time", &et);
    sr.start_time = st;
    sr.end_time = et;
    r.streams.push_back(sr);
  }
  return r;
}

}  // namespace podnet::wire::iperf3
