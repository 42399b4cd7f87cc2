#include "exporter/probes/burst/coordination.h"

#include <algorithm>

#include "exporter/topology/burst_pairs.h"

namespace podnet::probes::burst {

PeriodDecision PeriodLatch::Decide(std::uint64_t period, const topology::Self& self,
                                   const std::vector<topology::Peer>& candidates,
                                   std::string_view secret) {
  if (!started_ || period != period_) {
    started_ = true;
    period_ = period;
    decided_.clear();
  }
  PeriodDecision d;
  bool listed = std::any_of(candidates.begin(), candidates.end(),
                            [&](const topology::Peer& p) { return topology::IsSelf(self, p); });
  for (const std::string& zone : topology::ZonesOf(candidates)) {
    if (!decided_.insert(zone).second) continue;
    if (!listed) {
      ++d.not_listed;
      continue;
    }
    auto pair = topology::ChooseBurstPair(period, self.zone, zone, candidates, secret);
    if (!pair) continue;  // no peer in that zone (a zone of one Pod: no same-zone pair)
    if (topology::IsSelf(self, candidates[pair->prober])) {
      d.targets.push_back(candidates[pair->peer]);
    } else {
      ++d.not_chosen;
    }
  }
  return d;
}

}  // namespace podnet::probes::burst
