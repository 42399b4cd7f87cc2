#include "exporter/log/last_chance.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <exception>

namespace podnet::log {

void RunOrExit(const char* loop_name, const std::function<void()>& loop) {
  try {
    loop();
    return;
  } catch (const std::exception& e) {
    spdlog::critical("unhandled exception in the {} loop, exiting: {}", loop_name, e.what());
  } catch (...) {
    spdlog::critical("unhandled exception of unknown type in the {} loop, exiting", loop_name);
  }
  spdlog::default_logger()->flush();
  std::_Exit(kLoopFailedExitCode);
}

}  // namespace podnet::log
