#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/topology/topology.h"

namespace podnet::topology {

/// Who bursts to whom for one ordered zone pair in one period: indexes into the Pod list given.
struct BurstPair {
  std::size_t prober = 0;  // a Pod of the source zone
  std::size_t peer = 0;    // a Pod of the peer zone, never the prober nor on the prober's node
};

/// The coordinated burst of the ordered zone pair (from_zone → to_zone) in period `period`
/// (floor(unix seconds / period length)), chosen by rendezvous (highest-random-weight) hashing
/// with no coordinator: the prober is the Pod of from_zone with the highest
/// RendezvousWeight("<secret> <period> <from_zone> <to_zone> prober", Pod name), the peer the
/// Pod of to_zone, other than the prober and not on its node (when both nodes are known), with
/// the highest weight under the key "... peer". Ties (astronomically rare) go to the smaller
/// name.
///
/// `secret` keys the weights so that nobody can aim them: with the weight a function of public
/// names only, a Pod name that wins a chosen period and pair is found in ~N tries (N Pods in the
/// zone; 51 measured at 10 per zone) and a forged or planted Pod takes the burst. The exporter
/// passes the Service's UID from its EndpointSlices' owner reference (discovery Snapshot::
/// service_uid): assigned by the API server, the same for every Pod that lists the Service,
/// never chosen by a Pod; it changes only when the Service is recreated. Empty (static peers,
/// tests): unkeyed.
///
/// `pods` is every discovered probe Pod (self included), in any order, with unique names;
/// only `name`, `node` and `zone` are read (an empty zone is one more zone). Pure: every Pod
/// that computes from the same list and period gets the same answer, so exactly one Pod of
/// from_zone bursts per pair and period. A new period draws again, so over many periods every
/// Pod of a zone is the prober about equally often.
///
/// When Pods compute from lists that differ (a relist in progress), a Pod acts only when it is
/// the highest of its own list: if each list lacks at most d of the Pods of from_zone that any
/// of them holds, at most d + 1 Pods (the d + 1 highest of that union) can act for one pair in
/// one period, and never more than the number of distinct lists.
///
/// std::nullopt when from_zone has no Pod, or to_zone has no Pod other than the prober (a zone
/// of one Pod has no same-zone pair).
std::optional<BurstPair> ChooseBurstPair(std::uint64_t period, std::string_view from_zone,
                                         std::string_view to_zone, const std::vector<Peer>& pods,
                                         std::string_view secret = {});

/// The Pods that take part in coordinated bursts: `pods` without those whose burst_port is 0
/// (a node pool kept out of bursts, discovery::kubernetes::ProbePeersOf), order kept; empty
/// when `self` is one of those (IsSelf): such a Pod decides no pair, it neither probes nor,
/// since every other Pod leaves it out too, receives a burst.
std::vector<Peer> BurstCandidates(const Self& self, std::vector<Peer> pods);

/// The distinct zones of `pods`, sorted ("" — unknown — first when present).
std::vector<std::string> ZonesOf(const std::vector<Peer>& pods);

}  // namespace podnet::topology
