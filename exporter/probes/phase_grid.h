#pragma once

#include <chrono>

namespace podnet::probes {

/// The grid the scheduler lays round starts on (multiples of it from one epoch) and that probes
/// round their own later deadlines up to: work due at about the same time then shares one
/// wake-up of the probe loop, so the loop wakes at most 50 times a second for round starts and
/// timeouts however many peers there are (bench/README.md: 200 peers at 1 round/s switch the
/// exporter in 49 times a second, against ~130 on a 5 ms grid). Accuracy is untouched: RTT comes
/// from kernel timestamps, not from when a send was due; spacings inside a train are not rounded.
inline constexpr std::chrono::milliseconds kPhaseGrid{20};

}  // namespace podnet::probes
