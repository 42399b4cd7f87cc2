#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace podnet::config {

/// Looks up an environment variable; std::nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

/// The process environment (getenv).
EnvLookup ProcessEnv();

/// Expands `${VAR}` and `${VAR:-default}` in a configuration value; `$$` is a literal `$`.
/// An unset variable expands to the empty string (as Prometheus does for external labels),
/// unless a default is given; its name is appended to *unset when `unset` is not null, so the
/// caller can warn about a likely typo. Returns std::nullopt and sets *error on an unterminated
/// `${` or a bad variable name ([A-Za-z_][A-Za-z0-9_]*).
std::optional<std::string> ExpandEnv(std::string_view value, const EnvLookup& env,
                                     std::string* error, std::vector<std::string>* unset = nullptr);

}  // namespace podnet::config
