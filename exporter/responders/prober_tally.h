#pragma once

#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace podnet::responders {

/// What a responder calls with the source address of each request it serves (UdpEchoResponder,
/// GrpcHealthServer; the responder loop for HTTP /echo): ProberTally::Heard at the current time.
using HeardHook = std::function<void(const boost::asio::ip::address& source)>;

/// A probe Pod this Pod's responders may hear from: its address, its zone ("" when unknown)
/// and the path class from that Pod to this one (topology::PathClassName: "same_node",
/// "same_zone", "cross_zone", "unknown").
struct KnownProber {
  boost::asio::ip::address address;
  std::string zone;
  std::string path_class;

  bool operator==(const KnownProber&) const = default;
};

/// Coverage as the watched node sees it: how many distinct probe Pods reached this Pod's
/// responders in the last `window`, by the probers' zone. A node that no prober samples looks
/// healthy to every alert; this says so from the node's own side, where Prometheus sharding
/// cannot split it (every series is this Pod's).
///
/// Heard() is called with the source of every UDP echo request answered, every HTTP /echo
/// request and every gRPC health call; a source that is not a KnownProber (a stranger, kubelet's
/// health checks, an ad-hoc client) is not counted. ICMP RTT is answered by the kernel and
/// never seen: a fleet that runs no UDP RTT, HTTP or gRPC probe has no coverage figure (every
/// series 0), which the rules treat as "not measured".
///
/// Series: podnet_responder_probers{peer_node, peer_zone, source_zone, path_class}, a gauge of
/// probe Pods (count): `peer_node`/`peer_zone` are this Pod's (the node its probers watch, named
/// as their series name it), `source_zone` and `path_class` the probers'. One series per zone
/// and path class of the known probe Pods, 0 when none of them was heard: at most zones + 2
/// series. Refreshed by Publish().
///
/// Thread-safe: Heard() comes from the responder loop and gRPC's threads; the rest is called
/// on the responder loop. Memory: one entry per known probe Pod (SetProbers), nothing per
/// stranger.
class ProberTally {
 public:
  using Clock = std::chrono::steady_clock;
  /// Five minutes: the recording rules' rate window, and 10 rounds of the deploy default's
  /// 30 s HTTP and gRPC probes.
  static constexpr std::chrono::seconds kDefaultWindow{300};

  explicit ProberTally(prometheus::Registry& registry,
                       std::chrono::seconds window = kDefaultWindow);
  ~ProberTally();
  ProberTally(const ProberTally&) = delete;
  ProberTally& operator=(const ProberTally&) = delete;

  /// This Pod's node and zone (the effective topology::Self). A change removes every series;
  /// the next Publish() writes them under the new labels. Before it is called, nothing is
  /// published.
  void SetSelf(const std::string& node, const std::string& zone);
  /// The probe Pods from now on (discovery's every ready endpoint and the static peers). When
  /// was each heard is kept for addresses that stay; a repeated address keeps its first entry.
  void SetProbers(const std::vector<KnownProber>& probers);
  /// `source` (an IPv4-mapped IPv6 address counts as its IPv4 address) reached a responder at
  /// `now`. O(log n) under a lock; nothing happens for an address not in SetProbers' list.
  void Heard(const boost::asio::ip::address& source, Clock::time_point now);
  /// Writes the gauges: per zone and path class, the probe Pods heard within the window before
  /// `now`.
  void Publish(Clock::time_point now);

  std::chrono::seconds window() const { return window_; }

 private:
  using Group = std::pair<std::string, std::string>;  // (source_zone, path_class)
  struct Entry {
    std::size_t group;  // index into groups_
    Clock::time_point heard{};
    bool ever = false;
  };

  prometheus::Family<prometheus::Gauge>& family_;
  const std::chrono::seconds window_;
  std::mutex mu_;  // guards probers_ (Heard runs on gRPC's threads too)
  std::map<boost::asio::ip::address, Entry> probers_;
  // The rest only on the responder loop.
  std::vector<Group> groups_;                                // of the known probe Pods, sorted
  std::map<Group, prometheus::Gauge*> gauges_;               // the series written, by group
  std::optional<std::pair<std::string, std::string>> self_;  // (node, zone)

  void RemoveSeries();
};

}  // namespace podnet::responders
