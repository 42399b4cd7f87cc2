#pragma once

// Checks of a configuration file's text that run before (and independently of) the YAML
// parser, so that hostile input gets a clear error with its place instead of a parser's
// exhaustion or a misleading position.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace podnet::config {

/// A place in the text: 1-based line and column (in bytes).
struct TextPlace {
  int line = 1;
  int column = 1;
};

/// The first byte sequence that is not well-formed UTF-8 (RFC 3629 §4: no overlong forms, no
/// surrogates, nothing above U+10FFFF); std::nullopt when all of `text` is UTF-8. Names become
/// Prometheus label values, which must be UTF-8 (exposition format).
std::optional<TextPlace> FindInvalidUtf8(std::string_view text);
inline bool IsValidUtf8(std::string_view text) { return !FindInvalidUtf8(text).has_value(); }

/// The first control character of UTF-8 `text` (Unicode category Cc: U+0000–U+001F, U+007F,
/// U+0080–U+009F) as ("U+001B", its 0-based byte offset); std::nullopt when there is none.
/// Configuration values become label values, log text and /podnet/info, where a NUL, a newline
/// or a terminal escape sequence is never meant.
std::optional<std::pair<std::string, std::size_t>> FindControlCharacter(std::string_view text);

/// Nesting found by a light scan of YAML text: flow collections ([ ], { }) outside quoted
/// scalars and comments, and block nesting by indentation and "- " entries.
struct Nesting {
  int depth = 0;                      // the deepest nesting seen (up to the first that is too deep)
  std::optional<TextPlace> too_deep;  // where nesting first went beyond `max_depth`
  std::optional<TextPlace> unclosed;  // the innermost [ or { still open at the end
};
Nesting ScanNesting(std::string_view text, int max_depth);

}  // namespace podnet::config
