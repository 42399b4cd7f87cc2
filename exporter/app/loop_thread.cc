#include "exporter/app/loop_thread.h"

#include <spdlog/spdlog.h>

#include <cstring>

#include "exporter/log/last_chance.h"

namespace podnet::app {

void LoopThread::Start() {
  work_.emplace(boost::asio::make_work_guard(io_));
  thread_ = std::thread([this] {
    runtime::BindLoop bind(role_);
    if (int err = runtime::RequestShortSlice()) {
      spdlog::debug("{} loop: no short time slice: {}", name_, std::strerror(err));
    }
    log::RunOrExit(name_, [this] { io_.run(); });
  });
}

void LoopThread::Join() {
  if (!thread_.joinable()) return;
  io_.stop();
  thread_.join();
  work_.reset();
}

}  // namespace podnet::app
