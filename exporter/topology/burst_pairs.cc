#include "exporter/topology/burst_pairs.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "exporter/topology/selection.h"

namespace podnet::topology {

namespace {

// The Pod of `zone` with the highest weight under `key`, skipping `skip` (and Pods on
// `skip_node` when it is not empty).
std::optional<std::size_t> Highest(const std::string& key, std::string_view zone,
                                   const std::vector<Peer>& pods, std::optional<std::size_t> skip,
                                   std::string_view skip_node) {
  std::optional<std::size_t> best;
  std::uint64_t best_weight = 0;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    const Peer& p = pods[i];
    if (p.zone != zone || (skip && *skip == i)) continue;
    if (!skip_node.empty() && p.node == skip_node) continue;
    std::uint64_t w = RendezvousWeight(key, p.name);
    if (!best || std::tie(w, pods[*best].name) > std::tie(best_weight, p.name)) {
      best = i;
      best_weight = w;
    }
  }
  return best;
}

}  // namespace

std::optional<BurstPair> ChooseBurstPair(std::uint64_t period, std::string_view from_zone,
                                         std::string_view to_zone, const std::vector<Peer>& pods,
                                         std::string_view secret) {
  // Spaces cannot appear in the period's digits; RendezvousWeight length-prefixes both keys, so
  // zone names (whatever they hold) cannot make two pairs' keys collide into one string either
  // way round: the key is the secret, the period, then each zone, each string with its length.
  auto counted = [](std::string_view text) {
    return std::to_string(text.size()) + ":" + std::string(text);
  };
  std::string key = counted(secret) + " " + std::to_string(period) + " " + counted(from_zone) +
                    " " + counted(to_zone);
  auto prober = Highest(key + " prober", from_zone, pods, std::nullopt, {});
  if (!prober) return std::nullopt;
  auto peer = Highest(key + " peer", to_zone, pods, prober, pods[*prober].node);
  if (!peer) return std::nullopt;
  return BurstPair{*prober, *peer};
}

std::vector<Peer> BurstCandidates(const Self& self, std::vector<Peer> pods) {
  auto out =
      std::stable_partition(pods.begin(), pods.end(), [](const Peer& p) { return p.burst_port; });
  bool self_out = std::any_of(out, pods.end(), [&](const Peer& p) { return IsSelf(self, p); });
  pods.erase(self_out ? pods.begin() : out, pods.end());
  return pods;
}

std::vector<std::string> ZonesOf(const std::vector<Peer>& pods) {
  std::set<std::string> zones;
  for (const Peer& p : pods) zones.insert(p.zone);
  return {zones.begin(), zones.end()};
}

}  // namespace podnet::topology
