#pragma once

// Reading the text exposition format (version 0.0.4) in tests.

#include <map>
#include <sstream>
#include <string>

namespace podnet::testing {

// name -> type of every "# TYPE name type" line of `text`, in the text exposition format.
inline std::map<std::string, std::string> TypeLines(const std::string& text) {
  std::map<std::string, std::string> types;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::size_t end = line.find(' ', 7);
    types[line.substr(7, end - 7)] = line.substr(end + 1);
  }
  return types;
}

}  // namespace podnet::testing
