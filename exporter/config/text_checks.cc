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

namespace {

// ScanNesting's state from line to line: the open flow collections ([ and {, outside quotes and
// comments), the indentation of the open block levels, and an open quoted scalar.
class NestingScanner {
 public:
  explicit NestingScanner(int max_depth) : max_depth_(max_depth) {}

  bool done() const { return out_.too_deep.has_value(); }

  // Line number `line` (from 1), without its newline.
  void Line(std::string_view l, int line) {
    if (flow_.empty() && quote_ == 0) Block(l, line);
    Flow(l, line);
  }

  Nesting Finish() {
    if (!flow_.empty() && !out_.too_deep) out_.unclosed = flow_.back();
    return out_;
  }

 private:
  void Deeper(int depth, TextPlace at) {
    if (depth > out_.depth) out_.depth = depth;
    if (depth > max_depth_ && !out_.too_deep) out_.too_deep = at;
  }

  // Block structure: lines outside flow collections and quotes, not blank, not comments.
  void Block(std::string_view l, int line) {
    std::size_t indent = l.find_first_not_of(' ');
    if (indent == std::string_view::npos || l[indent] == '#') return;
    while (!block_.empty() && block_.back() > static_cast<int>(indent)) block_.pop_back();
    if (block_.empty() || block_.back() < static_cast<int>(indent)) {
      block_.push_back(static_cast<int>(indent));
    }
    // Compact nesting: "- - - a" opens one level per "- ".
    int extra = 0;
    std::size_t k = indent;
    while (k + 1 < l.size() && l[k] == '-' && l[k + 1] == ' ') {
      ++extra;
      k = l.find_first_not_of(' ', k + 1);
      if (k == std::string_view::npos) break;
    }
    Deeper(static_cast<int>(block_.size()) + extra + static_cast<int>(flow_.size()),
           {line, static_cast<int>(indent) + 1});
  }

  // Inside a quoted scalar at column `*col`: moves past an escape; closes the quote at its end.
  void Quoted(std::string_view l, std::size_t* col) {
    char c = l[*col];
    if (quote_ == '\'') {
      if (c != '\'') return;
      if (*col + 1 < l.size() && l[*col + 1] == '\'') {
        ++*col;  // '' is an escaped quote
      } else {
        quote_ = 0;
      }
    } else if (c == '\\') {
      ++*col;
    } else if (c == '"') {
      quote_ = 0;
    }
  }

  // Quotes, comments and flow collections, character by character.
  void Flow(std::string_view l, int line) {
    char prev = ' ';  // the last non-space character before this one on the line
    for (std::size_t col = 0; col < l.size() && !done(); ++col) {
      char c = l[col];
      if (quote_ != 0) {
        Quoted(l, &col);
        continue;
      }
      if (c == '#' && (col == 0 || l[col - 1] == ' ' || l[col - 1] == '\t')) break;  // comment
      // A quote opens a quoted scalar only where a scalar starts (not the ' in "don't").
      if ((c == '\'' || c == '"') && (prev == ' ' || prev == ':' || prev == '[' || prev == '{' ||
                                      prev == ',' || prev == '-')) {
        quote_ = c;
      } else if (c == '[' || c == '{') {
        flow_.push_back({line, static_cast<int>(col) + 1});
        Deeper(static_cast<int>(block_.size() + flow_.size()), flow_.back());
      } else if ((c == ']' || c == '}') && !flow_.empty()) {
        flow_.pop_back();
      }
      if (c != ' ' && c != '\t') prev = c;
    }
  }

  int max_depth_;
  Nesting out_;
  std::vector<TextPlace> flow_;
  std::vector<int> block_;
  char quote_ = 0;  // inside '…' or "…"
};

}  // namespace

Nesting ScanNesting(std::string_view text, int max_depth) {
  NestingScanner scanner(max_depth);
  int line = 1;
  std::size_t i = 0;
  while (i < text.size() && !scanner.done()) {
    std::size_t end = text.find('\n', i);
    if (end == std::string_view::npos) end = text.size();
    scanner.Line(text.substr(i, end - i), line);
    ++line;
    i = end + 1;
  }
  return scanner.Finish();
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
