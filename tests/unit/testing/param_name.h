#pragma once

// Names for value-parameterized tests (INSTANTIATE_TEST_SUITE_P's fourth argument). Without one,
// GoogleTest numbers the cases and CMake's gtest_discover_tests names each ctest test after the
// printed parameter, which for a struct holding a std::string is its raw bytes, heap address
// included: a different name on every build. These names are the case's own text, made of
// the characters GoogleTest allows ([A-Za-z0-9_]), after its index so that they stay unique.

#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>

namespace podnet::testing {

/// "<index>_<text>" with every run of characters other than ASCII letters and digits as one
/// '_' ("1 s" -> "7_1_s", "" -> "3_empty").
inline std::string ParamName(std::size_t index, std::string_view text) {
  std::string out = std::to_string(index) + "_";
  bool gap = false;
  for (unsigned char c : text) {
    if (std::isalnum(c) && c < 0x80) {
      if (gap && out.back() != '_') out += '_';
      out += static_cast<char>(c);
      gap = false;
    } else {
      gap = true;
    }
  }
  if (gap && out.back() != '_') out += '_';
  if (out.back() == '_' && out.size() == std::to_string(index).size() + 1) out += "empty";
  return out;
}

}  // namespace podnet::testing
