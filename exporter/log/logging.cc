#include "exporter/log/logging.h"

#include <spdlog/formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

#ifdef PODNET_WITH_GRPC
#include <grpc/support/log.h>
#endif

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
    } else if (static_cast<unsigned char>(c) < 0x20) {  // char is unsigned on arm64
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

bool IsKeyChar(char c, bool first) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (!first && c >= '0' && c <= '9');
}

// One `key=value` token: `key` an identifier (not one of the record's own ts, level, msg), the
// value non-empty and free of spaces (it is unquoted where it came from).
bool SplitField(std::string_view token, LogField* field) {
  auto eq = token.find('=');
  if (eq == 0 || eq == std::string_view::npos || eq + 1 == token.size()) return false;
  std::string_view key = token.substr(0, eq);
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (!IsKeyChar(key[i], i == 0)) return false;
  }
  if (key == "ts" || key == "level" || key == "msg") return false;
  std::string_view value = token.substr(eq + 1);
  if (value.find('=') != std::string_view::npos) return false;
  *field = {std::string(key), std::string(value)};
  return true;
}

class LineFormatter : public spdlog::formatter {
 public:
  explicit LineFormatter(Format f) : format_(f) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string line = FormatRecord(format_, msg.level, msg.time,
                                    std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<LineFormatter>(format_);
  }

 private:
  Format format_;
};

#ifdef PODNET_WITH_GRPC
// gRPC core's own log lines (gpr_log), as records of ours: the same format and level filter.
// Its errors are warnings here: what matters to the operator (a listener that cannot bind, a
// probe that fails) is reported once, in our words, where it happens.
void GrpcLog(gpr_log_func_args* args) {
  auto level =
      args->severity == GPR_LOG_SEVERITY_ERROR ? spdlog::level::warn : spdlog::level::debug;
  spdlog::log(level, "grpc: {} ({}:{})", args->message ? args->message : "",
              args->file ? args->file : "?", args->line);
}
#endif

}  // namespace

std::string SplitFields(std::string_view message, std::vector<LogField>* fields) {
  fields->clear();
  std::size_t end = message.size();
  while (end > 0) {
    std::size_t space = message.rfind(' ', end - 1);
    std::size_t begin = space == std::string_view::npos ? 0 : space + 1;
    if (begin == 0) break;  // the first word is always text: a record has a message
    LogField f;
    if (!SplitField(message.substr(begin, end - begin), &f)) break;
    fields->push_back(std::move(f));
    end = space;
  }
  std::reverse(fields->begin(), fields->end());
  return std::string(message.substr(0, end));
}

std::string FormatRecord(Format format, spdlog::level::level_enum level,
                         std::chrono::system_clock::time_point time, std::string_view message) {
  std::vector<LogField> fields;
  std::string text = SplitFields(message, &fields);
  std::string line;
  if (format == Format::kJson) {
    nlohmann::ordered_json j{{"ts", Timestamp(time)}, {"level", LevelName(level)}, {"msg", text}};
    for (auto& [k, v] : fields) j[k] = v;
    line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line = "ts=" + Timestamp(time) + " level=" + LevelName(level) + " msg=" + LogfmtValue(text);
    for (const auto& [k, v] : fields) line += " " + k + "=" + LogfmtValue(v);
  }
  return line + "\n";
}

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
#ifdef PODNET_WITH_GRPC
  gpr_set_log_function(GrpcLog);
#endif
}

}  // namespace podnet::log
