#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/topology/topology.h"

namespace podnet::probes::burst {

/// What one Pod decided for the zone pairs it had not decided yet in a period.
struct PeriodDecision {
  /// The peers this Pod bursts to now: one per pair (self.zone → zone) it is the prober of.
  std::vector<topology::Peer> targets;
  /// Pairs another Pod probes this period (podnet_burst_pairs_skipped_total{reason="not_chosen"}).
  std::size_t not_chosen = 0;
  /// Pairs skipped because this Pod is not in its own discovered list (not ready yet, or
  /// leaving): the others do not count it, so it must not act (reason="not_listed").
  std::size_t not_listed = 0;
};

/// The coordinated bursts' decisions of one Pod (probes.burst with peers.kubernetes): each pair
/// (self.zone → B) is decided once per period, from the list the Pod holds at its first round in
/// that period that sees zone B (topology::ChooseBurstPair). Decided pairs stay decided until
/// the period ends, so a Pod that leaves mid-period does not hand the pair to another Pod in the
/// same period: the pair is probed by at most the one prober, and the next period picks again.
/// The probe loop keeps one per exporter (ProbeEnv::burst_latch), so a reload does not decide a
/// period twice. Not thread-safe (probe loop).
class PeriodLatch {
 public:
  /// Decides every pair (self.zone → B), for each zone B among `candidates` (every discovered
  /// Pod, self included when listed) not yet decided in `period`; a new period forgets the
  /// previous one's decisions. Empty candidates (discovery has not listed yet): nothing.
  /// `secret` keys the choice (topology::ChooseBurstPair: the Service's UID).
  PeriodDecision Decide(std::uint64_t period, const topology::Self& self,
                        const std::vector<topology::Peer>& candidates,
                        std::string_view secret = {});

 private:
  bool started_ = false;
  std::uint64_t period_ = 0;
  std::set<std::string> decided_;  // peer zones decided in period_
};

}  // namespace podnet::probes::burst
