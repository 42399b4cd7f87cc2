#pragma once

#include <functional>

namespace podnet::log {

/// The exit code when an exception escapes an event loop: EX_SOFTWARE (sysexits.h), "internal
/// software error" — distinct from 1 (a listener) and 2 (configuration).
inline constexpr int kLoopFailedExitCode = 70;

/// Runs `loop` (an io_context's run(), typically) as the last line of defence: an exception
/// that escapes it — a bug, since handlers turn bad input into errors and counters — is logged
/// at critical level with `loop_name` and what() and the process exits kLoopFailedExitCode at
/// once (std::_Exit: the other threads may hold locks, so no destructors run). Better a restart
/// by the kubelet than a process whose loop silently stopped, or std::terminate's bare abort.
void RunOrExit(const char* loop_name, const std::function<void()>& loop);

}  // namespace podnet::log
