#include "exporter/config/text_checks.h"

#include <cstdio>
#include <vector>

namespace podnet::config {

std::optional<TextPlace> FindInvalidUtf8(std::string_view text) {
  TextPlace at;
  std::size_t i = 0;
  while (i < text.size()) {
    auto b = static_cast<unsigned char>(text[i]);
    std::size_t len = 0;
    unsigned min = 0;  // the smallest code point of this length (shorter forms are overlong)
    unsigned cp = 0;
    if (b < 0x80) {
      len = 1;
      cp = b;
    } else if ((b & 0xE0) == 0xC0) {
      len = 2, min = 0x80, cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, min = 0x800, cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, min = 0x10000, cp = b & 0x07;
    } else {
      return at;
    }
    if (i + len > text.size()) return at;
    for (std::size_t k = 1; k < len; ++k) {
      auto c = static_cast<unsigned char>(text[i + k]);
      if ((c & 0xC0) != 0x80) return at;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (len > 1 && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) return at;
    if (b == '\n') {
      ++at.line;
      at.column = 1;
    } else {
      ++at.column;
    }
    i += len;
  }
  return std::nullopt;
}

Nesting ScanNesting(std::string_view text, int max_depth) {
  Nesting out;
  std::vector<TextPlace> flow;  // open [ and { (outside quotes and comments)
  std::vector<int> block;       // indentation of the open block levels
  char quote = 0;               // inside '…' or "…"
  auto deeper = [&](int depth, TextPlace at) {
    if (depth > out.depth) out.depth = depth;
    if (depth > max_depth && !out.too_deep) out.too_deep = at;
  };
  int line = 1;
  std::size_t i = 0;
  while (i < text.size() && !out.too_deep) {
    std::size_t end = text.find('\n', i);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(i, end - i);
    std::size_t col = 0;
    // Block structure: lines outside flow collections and quotes, not blank, not comments.
    if (flow.empty() && quote == 0) {
      std::size_t indent = l.find_first_not_of(' ');
      if (indent != std::string_view::npos && l[indent] != '#') {
        while (!block.empty() && block.back() > static_cast<int>(indent)) block.pop_back();
        if (block.empty() || block.back() < static_cast<int>(indent)) {
          block.push_back(static_cast<int>(indent));
        }
        // Compact nesting: "- - - a" opens one level per "- ".
        int extra = 0;
        std::size_t k = indent;
        while (k + 1 < l.size() && l[k] == '-' && l[k + 1] == ' ') {
          ++extra;
          k = l.find_first_not_of(' ', k + 1);
          if (k == std::string_view::npos) break;
        }
        deeper(static_cast<int>(block.size()) + extra + static_cast<int>(flow.size()),
               {line, static_cast<int>(indent) + 1});
      }
    }
    char prev = ' ';  // the last non-space character before this one on the line
    for (; col < l.size() && !out.too_deep; ++col) {
      char c = l[col];
      if (quote == '\'') {
        if (c == '\'') {
          if (col + 1 < l.size() && l[col + 1] == '\'') {
            ++col;  // '' is an escaped quote
          } else {
            quote = 0;
          }
        }
        continue;
      }
      if (quote == '"') {
        if (c == '\\') {
          ++col;
        } else if (c == '"') {
          quote = 0;
        }
        continue;
      }
      if (c == '#' && (col == 0 || l[col - 1] == ' ' || l[col - 1] == '\t')) break;  // comment
      // A quote opens a quoted scalar only where a scalar starts (not the ' in "don't").
      if ((c == '\'' || c == '"') && (prev == ' ' || prev == ':' || prev == '[' || prev == '{' ||
                                      prev == ',' || prev == '-')) {
        quote = c;
      } else if (c == '[' || c == '{') {
        flow.push_back({line, static_cast<int>(col) + 1});
        deeper(static_cast<int>(block.size() + flow.size()), flow.back());
      } else if ((c == ']' || c == '}') && !flow.empty()) {
        flow.pop_back();
      }
      if (c != ' ' && c != '\t') prev = c;
    }
    ++line;
    i = end + 1;
  }
  if (!flow.empty() && !out.too_deep) out.unclosed = flow.back();
  return out;
}

std::optional<std::pair<std::string, std::size_t>> FindControlCharacter(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    unsigned code = 0x100;  // none
    if (b < 0x20 || b == 0x7f) {
      code = b;
    } else if (b == 0xc2 && i + 1 < text.size()) {  // U+0080-U+009F are C2 80 - C2 9F
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9f) code = next;
    }
    if (code != 0x100) {
      char name[8];
      std::snprintf(name, sizeof name, "U+%04X", code);
      return std::make_pair(std::string(name), i);
    }
  }
  return std::nullopt;
}

}  // namespace podnet::config
