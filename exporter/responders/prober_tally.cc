#include "exporter/responders/prober_tally.h"

#include <algorithm>

#include "exporter/net/address.h"

namespace podnet::responders {

ProberTally::ProberTally(prometheus::Registry& registry, std::chrono::seconds window)
    : family_(prometheus::BuildGauge()
                  .Name("podnet_responder_probers")
                  .Help("Probe Pods whose UDP echo, HTTP /echo or gRPC health requests reached "
                        "this Pod's responders in the last 5 minutes, by their zone and path "
                        "class (peer_node, peer_zone: this Pod's)")
                  .Register(registry)),
      window_(window) {}

ProberTally::~ProberTally() { RemoveSeries(); }

void ProberTally::RemoveSeries() {
  for (auto& [group, gauge] : gauges_) family_.Remove(gauge);
  gauges_.clear();
}

void ProberTally::SetSelf(const std::string& node, const std::string& zone) {
  std::pair<std::string, std::string> self{node, zone};
  if (self_ == self) return;
  RemoveSeries();
  self_ = std::move(self);
}

void ProberTally::SetProbers(const std::vector<KnownProber>& probers) {
  // An address's first entry wins, and only kept entries make groups (series).
  std::map<boost::asio::ip::address, const KnownProber*> kept;
  for (const auto& p : probers) kept.emplace(net::Unmapped(p.address), &p);
  std::vector<Group> groups;
  for (const auto& [address, p] : kept) groups.emplace_back(p->zone, p->path_class);
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  auto index = [&](const KnownProber& p) {
    Group g{p.zone, p.path_class};
    return static_cast<std::size_t>(std::lower_bound(groups.begin(), groups.end(), g) -
                                    groups.begin());
  };
  {
    std::map<boost::asio::ip::address, Entry> next;
    std::lock_guard lock(mu_);
    for (const auto& [address, p] : kept) {
      Entry e{index(*p)};
      if (auto old = probers_.find(address); old != probers_.end()) {
        e.heard = old->second.heard;
        e.ever = old->second.ever;
      }
      next.emplace(address, e);
    }
    probers_.swap(next);
  }
  // A group no known probe Pod belongs to any more loses its series.
  for (auto it = gauges_.begin(); it != gauges_.end();) {
    if (std::binary_search(groups.begin(), groups.end(), it->first)) {
      ++it;
    } else {
      family_.Remove(it->second);
      it = gauges_.erase(it);
    }
  }
  groups_ = std::move(groups);
}

void ProberTally::Heard(const boost::asio::ip::address& source, Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = probers_.find(net::Unmapped(source));
  if (it == probers_.end()) return;
  it->second.heard = std::max(it->second.heard, now);
  it->second.ever = true;
}

void ProberTally::Publish(Clock::time_point now) {
  if (!self_) return;
  std::vector<int> heard(groups_.size(), 0);
  {
    std::lock_guard lock(mu_);
    for (const auto& [address, e] : probers_) {
      if (e.ever && now - e.heard <= window_) ++heard[e.group];
    }
  }
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    auto& gauge = gauges_[groups_[i]];
    if (gauge == nullptr) {
      gauge = &family_.Add({{"peer_node", self_->first},
                            {"peer_zone", self_->second},
                            {"source_zone", groups_[i].first},
                            {"path_class", groups_[i].second}});
    }
    gauge->Set(heard[i]);
  }
}

}  // namespace podnet::responders
