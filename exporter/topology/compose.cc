#include "exporter/topology/compose.h"

#include <algorithm>
#include <set>
#include <string>

#include "exporter/topology/selection.h"

namespace podnet::topology {

namespace {

// The peers of `from` other than self, classified against self.
std::vector<Peer> OthersClassified(const Self& self, const std::vector<Peer>& from) {
  std::vector<Peer> out;
  for (const Peer& p : from) {
    if (IsSelf(self, p)) continue;
    out.push_back(p);
    out.back().path = Classify(self, p.node, p.zone);
  }
  return out;
}

}  // namespace

Composition ComposePeers(const Self& self, const std::vector<Peer>& static_peers,
                         const std::vector<Peer>& discovered, const SelectionOptions& options) {
  Composition c;
  c.peers = OthersClassified(self, static_peers);
  std::set<std::string, std::less<>> static_names;
  for (const Peer& p : c.peers) static_names.insert(p.name);
  std::vector<Peer> candidates = OthersClassified(self, discovered);
  c.candidates = candidates.size();
  // The duty ring places this Pod where the others place it: by its own discovered record
  // (its node and zone as its EndpointSlice gives them, which the Node may not have told it
  // yet), and not at all when it is not listed.
  auto record = std::find_if(discovered.begin(), discovered.end(),
                             [&](const Peer& p) { return IsSelf(self, p); });
  Self ring_self = self;
  if (record != discovered.end()) {
    ring_self.node = record->node;
    ring_self.zone = record->zone;
  }
  for (Peer& p :
       SelectPeers(ring_self, candidates, options.peers_per_zone, record != discovered.end())) {
    if (static_names.count(p.name)) continue;  // the static entry of the same name wins
    c.peers.push_back(std::move(p));
    ++c.selected;
  }
  std::sort(c.peers.begin(), c.peers.end(),
            [](const Peer& a, const Peer& b) { return a.name < b.name; });
  return c;
}

}  // namespace podnet::topology
