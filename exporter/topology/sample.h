#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "exporter/topology/topology.h"

namespace podnet::topology {

/// The period a wall-clock time falls in: floor(unix seconds / period), the number every Pod
/// computes alike (their clocks agree to well within a period; NTP). 0 before the epoch or for a
/// period that is not positive.
std::uint64_t PeriodNumber(std::chrono::system_clock::time_point now,
                           std::chrono::nanoseconds period);

/// Whether `self` is one of the `count` Pods of its zone that do `duty` in period `period`: the
/// Pods of that zone with the highest RendezvousWeight("<secret> <period> <zone> <duty>",
/// Peer::name) — a discovered probe Pod's node name, which a rollout keeps — (ties to the
/// smaller name), drawn again each period, so that over many periods every
/// Pod of a zone takes the duty about equally often, with no coordinator.
///
/// `pods` is every discovered probe Pod (self included when listed), with unique names; only
/// `name` and `zone` are read (an empty zone is one more zone). Self's zone is the one its own
/// record in `pods` says (IsSelf), as the others read it; a Pod not in `pods` (not ready yet, or
/// leaving) is never in the sample: the others do not count it. Every Pod that computes from the
/// same list and period agrees, so each zone has exactly min(count, its Pods) Pods in the sample.
/// When the lists differ (a relist in progress), a zone may have up to count + d (d: Pods one
/// list lacks that another holds) for that moment. `secret` keys the weights so that nobody
/// aims them (the peers' Service's UID, as ChooseBurstPair); empty: unkeyed. O(|pods|).
bool InZoneSample(std::string_view duty, std::uint64_t period, const Self& self,
                  const std::vector<Peer>& pods, std::size_t count, std::string_view secret);

}  // namespace podnet::topology
