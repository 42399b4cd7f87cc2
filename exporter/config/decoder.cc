#include "exporter/config/decoder.h"

namespace podnet::config {

namespace {

// Line `index` (0-based) of `text`, without its newline; empty past the end.
std::string_view LineAt(std::string_view text, int index) {
  std::size_t begin = 0;
  for (int i = 0; i < index; ++i) {
    begin = text.find('\n', begin);
    if (begin == std::string_view::npos) return {};
    ++begin;
  }
  return text.substr(begin, text.find('\n', begin) - begin);
}

// Whether `line` holds an unquoted "[...]:" (a bracketed IPv6 address with a port, which YAML
// reads as the start of a flow sequence): only then is the quoting hint worth printing.
bool UnquotedBracketedAddress(std::string_view line) {
  for (std::size_t at = line.find('['); at != std::string_view::npos; at = line.find('[', at + 1)) {
    std::size_t close = line.find("]:", at);
    if (close == std::string_view::npos) return false;
    if (at == 0 || (line[at - 1] != '"' && line[at - 1] != '\'')) return true;
  }
  return false;
}

}  // namespace

std::optional<YAML::Node> LoadYaml(const std::string& text, const std::string& file,
                                   std::vector<Error>* errors) {
  if (auto bad = FindInvalidUtf8(text)) {
    errors->push_back(Error{file, bad->line, bad->column, "",
                            "not valid UTF-8 (YAML files are text; names become label "
                            "values, which must be UTF-8)"});
    return std::nullopt;
  }
  Nesting nesting = ScanNesting(text, kMaxNesting);
  if (nesting.too_deep) {
    errors->push_back(Error{file, nesting.too_deep->line, nesting.too_deep->column, "",
                            "nested more than " + std::to_string(kMaxNesting) + " levels deep"});
    return std::nullopt;
  }
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    Error err;
    err.file = file;
    err.line = e.mark.line >= 0 ? e.mark.line + 1 : 0;
    err.column = e.mark.column >= 0 ? e.mark.column + 1 : 0;
    err.message = "malformed YAML: " + e.msg;
    bool flow_end = e.msg.find("flow not found") != std::string::npos;
    if (flow_end && nesting.unclosed) {
      // yaml-cpp reports where the input ended; the place to fix is the bracket left open.
      err.line = nesting.unclosed->line;
      err.column = nesting.unclosed->column;
      err.message = std::string("malformed YAML: this ") +
                    (e.msg.find("sequence") != std::string::npos ? "[" : "{") + " is never closed";
    }
    if (e.msg.find("flow") != std::string::npos && text.find("${") != std::string::npos) {
      err.message += " (inside { } or [ ], quote values with ${VAR}: \"${VAR}\")";
    } else if (UnquotedBracketedAddress(LineAt(text, e.mark.line)) ||
               UnquotedBracketedAddress(LineAt(text, e.mark.line - 1))) {
      err.message += " (quote bracketed IPv6 addresses: \"[::]:9479\")";
    }
    errors->push_back(std::move(err));
    return std::nullopt;
  }
}

bool RequiredStrings(Decoder& d, const YAML::Node& n, const std::string& base,
                     std::initializer_list<std::pair<const char*, std::string*>> fields) {
  bool ok = true;
  for (auto [key, out] : fields) {
    const std::string path = base + "." + key;
    const YAML::Node v = n[key];
    if (!v.IsDefined() || v.IsNull()) {
      d.Fail(n, path, "required");
      ok = false;
    } else if (auto s = d.String(v, path); !s) {
      ok = false;
    } else if (s->empty()) {
      d.Fail(v, path, "must not be empty");
      ok = false;
    } else {
      *out = *s;
    }
  }
  return ok;
}

void OptionalDurations(Decoder& d, const YAML::Node& n, const std::string& base,
                       std::initializer_list<std::pair<const char*, Duration*>> fields) {
  for (auto [key, out] : fields) {
    if (const YAML::Node v = n[key]; v.IsDefined()) {
      if (auto dur = d.PositiveDuration(v, base + "." + key)) *out = *dur;
    }
  }
}

std::optional<std::uint64_t> PositiveSize(Decoder& d, const YAML::Node& v,
                                          const std::string& path) {
  auto s = d.String(v, path);
  if (!s) return std::nullopt;
  auto size = ParseSize(*s);
  if (!size || *size == 0) {
    d.Fail(v, path, "must be a positive size (examples: 500MB, 20GB, 1GiB), got " + Quote(*s));
    return std::nullopt;
  }
  return size;
}

}  // namespace podnet::config
