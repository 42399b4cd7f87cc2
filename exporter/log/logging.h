#pragma once

#include <spdlog/common.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace podnet::log {

enum class Format { kLogfmt, kJson };

/// Parses --log.level: "debug" | "info" | "warn" | "error" (Prometheus's promlog names).
std::optional<spdlog::level::level_enum> ParseLevel(std::string_view s);
/// Parses --log.format: "logfmt" | "json".
std::optional<Format> ParseFormat(std::string_view s);

/// One `key=value` pair of a record.
struct LogField {
  std::string key;
  std::string value;
  bool operator==(const LogField&) const = default;
};

/// Splits a record's message into its text and the `key=value` words that end it (go-kit /
/// promlog style: `dns lookup name=a.example result=nxdomain queries=6`): the message text is
/// what comes before the first of the trailing run of `key=value` words; a key is an identifier
/// other than ts, level and msg, a value is non-empty and has no space or '='. The first word is
/// always text.
std::string SplitFields(std::string_view message, std::vector<LogField>* fields);

/// One record as one line (with its '\n'), logfmt or JSON, as Setup writes it.
std::string FormatRecord(Format format, spdlog::level::level_enum level,
                         std::chrono::system_clock::time_point time, std::string_view message);

/// Sends every spdlog record to stderr as one line, logfmt
/// (`ts=2026-01-02T03:04:05.678Z level=info msg="..."`) or JSON
/// (`{"ts":"...","level":"info","msg":"..."}`), values escaped so that one record is one line.
/// The `key=value` words that end a message (SplitFields) become fields of their own: logfmt
/// pairs after msg, JSON members after "msg". gRPC core's own log lines (builds with gRPC) come
/// through here too, its errors at warn.
void Setup(spdlog::level::level_enum level, Format format);

}  // namespace podnet::log
