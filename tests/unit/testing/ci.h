#pragma once

// Whether a test whose precondition is missing may skip: on a developer's machine it may, in
// CI it must not (a skip there would hide a test that never ran).

#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

namespace podnet::testing {

/// Whether this run is CI's: $CI is "true" (as .ci/run is started, and as GitHub Actions and
/// GitLab CI set it).
inline bool InCi() {
  const char* v = std::getenv("CI");
  return v != nullptr && std::string_view(v) == "true";
}

}  // namespace podnet::testing

/// Skips the test with `message` outside CI, fails it in CI (InCi()). Returns from the test
/// function, as GTEST_SKIP does.
#define PODNET_SKIP_UNLESS_CI(message)       \
  do {                                       \
    if (::podnet::testing::InCi()) {         \
      GTEST_FAIL() << message << " (in CI)"; \
    } else {                                 \
      GTEST_SKIP() << message;               \
    }                                        \
  } while (0)
