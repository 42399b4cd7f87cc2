#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <spdlog/common.h>

namespace podnet::log {

enum class Format { kLogfmt, kJson };

/// Parses --log.level: "debug" | "info" | "warn" | "error" (Prometheus's promlog names).
std::optional<spdlog::level::level_enum> ParseLevel(std::string_view s);
/// Parses --log.format: "logfmt" | "json".
std::optional<Format> ParseFormat(std::string_view s);

/// Sends every spdlog record to stderr as one line, logfmt
/// (`ts=2026-01-02T03:04:05.678Z level=info msg="..."`) or JSON
/// (`{"ts":"...","level":"info","msg":"..."}`), values escaped so that one record is one line.
void Setup(spdlog::level::level_enum level, Format format);

}  // namespace podnet::log
