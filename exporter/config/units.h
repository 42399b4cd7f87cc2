#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace podnet::config {

using Duration = std::chrono::nanoseconds;

/// Parses a Prometheus-style duration: one or more `<integer><unit>` terms in decreasing unit
/// order, units `y w d h m s ms` (as Prometheus common/model ParseDuration) plus `us` for
/// sub-millisecond spacing, e.g. "50ms", "10s", "1h30m". A bare "0" is zero.
/// Returns std::nullopt on any other text (no sign, no fraction, no spaces) or on overflow.
std::optional<Duration> ParseDuration(std::string_view text);

/// Formats a duration the way ParseDuration reads it, largest units first ("1m30s", "250us").
std::string FormatDuration(Duration d);

/// Parses a byte size: an integer, optionally followed by a unit. Decimal units `kB MB GB TB`
/// (10^3 steps) and binary units `KiB MiB GiB TiB` (2^10 steps), `B` for bytes, no unit = bytes.
/// Returns the size in bytes, or std::nullopt on bad text or overflow of 64 bits.
std::optional<std::uint64_t> ParseSize(std::string_view text);

}  // namespace podnet::config
