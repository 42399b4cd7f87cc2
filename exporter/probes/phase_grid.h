#pragma once

#include <chrono>

namespace podnet::probes {

/// The grid the scheduler lays round starts on (multiples of it from one epoch) and that probes
/// round their own later deadlines up to: work due at about the same time then shares one
/// wake-up of the probe loop (1,000 peers at 1 round/s: ~200 wake-ups/s, not thousands).
inline constexpr std::chrono::milliseconds kPhaseGrid{5};

}  // namespace podnet::probes
