#include "exporter/topology/sample.h"

#include <algorithm>
#include <string>
#include <tuple>

#include "exporter/topology/selection.h"

namespace podnet::topology {

std::uint64_t PeriodNumber(std::chrono::system_clock::time_point now,
                           std::chrono::nanoseconds period) {
  auto since = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch());
  if (since.count() < 0 || period.count() <= 0) return 0;
  return static_cast<std::uint64_t>(since.count() / period.count());
}

bool InZoneSample(std::string_view duty, std::uint64_t period, const Self& self,
                  const std::vector<Peer>& pods, std::size_t count, std::string_view secret) {
  auto me = std::find_if(pods.begin(), pods.end(), [&](const Peer& p) { return IsSelf(self, p); });
  if (me == pods.end() || count == 0) return false;
  // Length-prefixed parts, as ChooseBurstPair's keys: no zone or duty name makes two keys equal.
  auto counted = [](std::string_view text) {
    return std::to_string(text.size()) + ":" + std::string(text);
  };
  std::string key = counted(secret) + " " + std::to_string(period) + " " + counted(me->zone) + " " +
                    counted(duty);
  const std::uint64_t mine = RendezvousWeight(key, me->name);
  std::size_t above = 0;        // Pods of the zone that come before self: higher weight, or a tie
  for (const Peer& p : pods) {  // and a smaller name
    if (&p == &*me || p.zone != me->zone) continue;
    std::uint64_t w = RendezvousWeight(key, p.name);
    if (std::tie(w, me->name) > std::tie(mine, p.name) && ++above >= count) return false;
  }
  return true;
}

}  // namespace podnet::topology
