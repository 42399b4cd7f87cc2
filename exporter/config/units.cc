#include "exporter/config/units.h"

#include <array>
#include <charconv>
#include <limits>
#include <utility>

namespace podnet::config {
namespace {

using std::chrono::nanoseconds;

// Ordered from largest to smallest; a term's unit must come after the previous term's.
// "ms" and "us" must be tried before "m" and "s" share prefixes with them.
struct DurationUnit {
  std::string_view suffix;
  std::int64_t ns;
};
constexpr std::array<DurationUnit, 9> kDurationUnits{{
    {"y", 365LL * 24 * 3600 * 1'000'000'000},
    {"w", 7LL * 24 * 3600 * 1'000'000'000},
    {"d", 24LL * 3600 * 1'000'000'000},
    {"h", 3600LL * 1'000'000'000},
    {"m", 60LL * 1'000'000'000},
    {"s", 1'000'000'000},
    {"ms", 1'000'000},
    {"us", 1'000},
    {"ns", 1},
}};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::optional<Duration> ParseDuration(std::string_view text) {
  if (text == "0") return Duration::zero();
  if (text.empty()) return std::nullopt;
  std::int64_t total = 0;
  std::size_t last_unit = 0;  // index into kDurationUnits that the next unit must exceed
  bool first = true;
  while (!text.empty()) {
    std::size_t digits = 0;
    while (digits < text.size() && IsDigit(text[digits])) ++digits;
    if (digits == 0) return std::nullopt;
    std::int64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, value);
    if (ec != std::errc{}) return std::nullopt;
    text.remove_prefix(digits);
    std::size_t letters = 0;
    while (letters < text.size() && !IsDigit(text[letters])) ++letters;
    std::string_view suffix = text.substr(0, letters);
    text.remove_prefix(letters);
    std::size_t unit = kDurationUnits.size();
    for (std::size_t i = 0; i < kDurationUnits.size(); ++i) {
      if (kDurationUnits[i].suffix == suffix) unit = i;
    }
    if (unit == kDurationUnits.size()) return std::nullopt;
    if (!first && unit <= last_unit) return std::nullopt;  // "1s1m", "1s1s" are not durations
    first = false;
    last_unit = unit;
    std::int64_t ns = kDurationUnits[unit].ns;
    if (value > (std::numeric_limits<std::int64_t>::max() - total) / ns) return std::nullopt;
    total += value * ns;
  }
  return nanoseconds(total);
}

std::string FormatDuration(Duration d) {
  std::int64_t ns = d.count();
  if (ns == 0) return "0s";
  std::string out;
  if (ns < 0) {
    out = "-";
    ns = -ns;
  }
  // Skip "y" and "w" on output: "8d" reads better than "1w1d".
  for (std::size_t i = 2; i < kDurationUnits.size(); ++i) {
    const auto& u = kDurationUnits[i];
    if (ns >= u.ns) {
      out += std::to_string(ns / u.ns);
      out += u.suffix;
      ns %= u.ns;
    }
  }
  return out;
}

std::optional<std::uint64_t> ParseSize(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && IsDigit(text[digits])) ++digits;
  if (digits == 0) return std::nullopt;
  std::uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, value);
  if (ec != std::errc{}) return std::nullopt;
  std::string_view unit = text.substr(digits);
  if (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);  // "20 GB" is common
  static constexpr std::array<std::pair<std::string_view, std::uint64_t>, 10> kUnits{{
      {"", 1},
      {"B", 1},
      {"kB", 1'000ULL},
      {"MB", 1'000'000ULL},
      {"GB", 1'000'000'000ULL},
      {"TB", 1'000'000'000'000ULL},
      {"KiB", 1ULL << 10},
      {"MiB", 1ULL << 20},
      {"GiB", 1ULL << 30},
      {"TiB", 1ULL << 40},
  }};
  for (const auto& [suffix, factor] : kUnits) {
    if (unit == suffix) {
      if (value > std::numeric_limits<std::uint64_t>::max() / factor) return std::nullopt;
      return value * factor;
    }
  }
  return std::nullopt;
}

}  // namespace podnet::config
