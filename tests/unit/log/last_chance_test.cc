#include "exporter/log/last_chance.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "exporter/log/logging.h"

namespace podnet::log {
namespace {

TEST(LastChanceDeathTest, ExceptionIsLoggedAndExitsNonZero) {
  log::Setup(spdlog::level::info, Format::kLogfmt);  // to stderr, as the exporter logs
  EXPECT_EXIT(RunOrExit("serving", [] { throw std::runtime_error("type_error.302"); }),
              ::testing::ExitedWithCode(kLoopFailedExitCode),
              "unhandled exception in the serving loop, exiting: type_error.302");
  EXPECT_EXIT(RunOrExit("probe", [] { throw 42; }), ::testing::ExitedWithCode(kLoopFailedExitCode),
              "unknown type in the probe loop");
}

TEST(LastChanceTest, ALoopThatEndsReturns) {
  int runs = 0;
  RunOrExit("serving", [&] { ++runs; });
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace podnet::log
