#include "exporter/log/logging.h"

#include <ctime>

#include <nlohmann/json.hpp>
#include <spdlog/formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace podnet::log {
namespace {

const char* LevelName(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warn";
    default:
      return "error";
  }
}

std::string Timestamp(spdlog::log_clock::time_point tp) {
  auto since = tp.time_since_epoch();
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(since);
  auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since - secs).count();
  std::time_t t = secs.count();
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(millis));
  return out;
}

// logfmt quoting: a value with a space, '=', '"' or a control character is quoted and escaped.
std::string LogfmtValue(std::string_view v) {
  bool quote = v.empty();
  for (char c : v) quote = quote || c == ' ' || c == '=' || c == '"' || c < 0x20;
  if (!quote) return std::string(v);
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 && c >= 0) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

class LineFormatter : public spdlog::formatter {
 public:
  explicit LineFormatter(Format f) : format_(f) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string_view text(msg.payload.data(), msg.payload.size());
    std::string line;
    if (format_ == Format::kJson) {
      nlohmann::json j{{"ts", Timestamp(msg.time)}, {"level", LevelName(msg.level)},
                       {"msg", std::string(text)}};
      line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } else {
      line = "ts=" + Timestamp(msg.time) + " level=" + LevelName(msg.level) +
             " msg=" + LogfmtValue(text);
    }
    line += '\n';
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<LineFormatter>(format_);
  }

 private:
  Format format_;
};

}  // namespace

std::optional<spdlog::level::level_enum> ParseLevel(std::string_view s) {
  if (s == "debug") return spdlog::level::debug;
  if (s == "info") return spdlog::level::info;
  if (s == "warn") return spdlog::level::warn;
  if (s == "error") return spdlog::level::err;
  return std::nullopt;
}

std::optional<Format> ParseFormat(std::string_view s) {
  if (s == "logfmt") return Format::kLogfmt;
  if (s == "json") return Format::kJson;
  return std::nullopt;
}

void Setup(spdlog::level::level_enum level, Format format) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("podnet", sink);
  logger->set_formatter(std::make_unique<LineFormatter>(format));
  logger->set_level(level);
  logger->flush_on(spdlog::level::debug);
  spdlog::set_default_logger(logger);
}

}  // namespace podnet::log
