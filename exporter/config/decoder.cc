#include "exporter/config/decoder.h"

namespace podnet::config {

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
    } else if (text.find(": [") != std::string::npos && text.find("]:") != std::string::npos) {
      err.message += " (quote bracketed IPv6 addresses: \"[::]:9479\")";
    }
    errors->push_back(std::move(err));
    return std::nullopt;
  }
}

}  // namespace podnet::config
