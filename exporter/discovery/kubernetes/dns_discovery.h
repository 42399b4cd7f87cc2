#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/discovery/kubernetes/api_client.h"
#include "exporter/discovery/kubernetes/discovery.h"
#include "exporter/discovery/kubernetes/resources.h"

// Peer discovery through the headless Service's DNS records instead of an EndpointSlice watch
// (docs/design.md, "Discovery at scale"): the API server's cost per Pod stays two GETs (the
// own Node's zone, the Service's UID) whatever the cluster's size, where a watch is sent every
// slice write of every rollout.

namespace podnet::discovery::kubernetes {

/// Who answers at each address of the Service's DNS records, asked from the address itself
/// (the UDP echo identity record, proto/echo.h: node, zone, Pod). Pure bookkeeping, no I/O:
/// DnsDiscovery feeds it DNS answers and identity replies and asks what it says is due.
/// Times are steady_clock time points given by the caller.
///
/// Bounds, for a flood of records or a DNS server that lies: at most `max_addresses`
/// addresses (the rest of an answer is left out and counted by the caller); one identity per
/// address, replaced only by a later reply from that address.
class PeerIdentities {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  struct Options {
    /// An address missing from an answer with records leaves at once (it went unready or
    /// away); from answers without any (an NXDOMAIN or empty answer mid-rollout, when no Pod
    /// is ready for a moment) it leaves after this long.
    std::chrono::milliseconds absent_grace{90000};
    /// An identity this old is asked again (a Pod IP reused by another Pod while it stayed in
    /// the answers); an address that comes back after an empty answer is asked at once.
    std::chrono::milliseconds reask{600000};
    /// An ask unanswered this long is lost; the next try waits 2^tries × ask_timeout, at most
    /// `reask`.
    std::chrono::milliseconds ask_timeout{2000};
    std::size_t max_addresses = 20000;
  };
  explicit PeerIdentities(Options options) : options_(options) {}

  /// The addresses of the latest DNS answer (an NXDOMAIN or an empty answer: none). New ones
  /// are due to be asked at once; tracked ones missing from it leave (Options::absent_grace).
  /// Returns how many of `addresses` were left out (over max_addresses).
  std::size_t Answered(const std::vector<boost::asio::ip::address>& addresses, TimePoint now);
  /// The addresses to ask now, at most `max`, those due longest first; each is marked asked
  /// until now + ask_timeout.
  std::vector<boost::asio::ip::address> Due(TimePoint now, std::size_t max);
  enum class HeardResult {
    kIgnored,  // the address is not tracked, or has no ask in flight (a stray or late reply)
    kSame,     // it said what it said before
    kChanged,  // a new or changed identity: Endpoints() changed
  };
  /// A reply from `address` saying `identity` (names already checked by proto::echo); the
  /// address is asked again after `reask`, or, when it gave no zone (a Pod still reading its
  /// Node, or a node without a zone label), on the backoff of a lost ask.
  HeardResult Heard(const boost::asio::ip::address& address, const Endpoint& identity,
                    TimePoint now);
  /// The ask in flight to `address` failed (a reply without a usable identity record): asked
  /// again after 2^tries × ask_timeout. False when no ask was in flight.
  bool Lost(const boost::asio::ip::address& address, TimePoint now);
  /// Asks whose time ran out are Lost; returns how many.
  std::size_t Expire(TimePoint now);
  /// The identified addresses as endpoints (sorted by address), for ProbePeersOf. An address
  /// keeps its last identity while it waits for a re-ask.
  std::vector<Endpoint> Endpoints() const;
  /// Takes `known` (a restarted discovery's last peers, KubernetesWatches) as asked and
  /// answered at `now`: asked again after `reask`, kept through an answer without records for
  /// `absent_grace`, gone at once from an answer with records that leaves them out. Within the
  /// address cap; an address already known is left as it is.
  void Seed(const std::vector<Endpoint>& known, TimePoint now);
  /// Every tracked address was asked at least once and answered or timed out.
  bool AllAskedOnce() const;
  /// Node names claimed from more than one address (a lying responder, or a node with two
  /// probe Pods during a surge).
  std::size_t NodeConflicts() const;
  std::size_t size() const { return entries_.size(); }
  /// When the next ask falls due (std::nullopt: none tracked).
  std::optional<TimePoint> NextDue() const;

 private:
  struct Entry {
    std::optional<Endpoint> identity;
    TimePoint due{};                    // when to ask next
    std::optional<TimePoint> deadline;  // an ask in flight until then
    std::optional<TimePoint> absent_since;
    int tries = 0;         // asks unanswered in a row
    bool settled = false;  // asked once and answered or timed out
  };
  // The next ask after 2^tries × ask_timeout (at most `reask`); tries + 1.
  void RetrySoon(Entry& e, TimePoint now) const;

  Options options_;
  std::map<boost::asio::ip::address, Entry> entries_;
};

struct DnsDiscoveryOptions {
  /// The headless Service's name, fully qualified (peers.kubernetes.dns.name; by default
  /// SERVICE.NAMESPACE.svc.cluster.local), asked for A records, and AAAA when it has none.
  std::string name;
  boost::asio::ip::address nameserver;  // resolv.conf's first (app/kubernetes_watches.cc)
  std::uint16_t nameserver_port = 53;
  std::uint16_t port = 9479;                 // every peer's UDP echo port (peers.kubernetes.port)
  std::chrono::milliseconds refresh{30000};  // between answers; jittered ±10 %
  std::chrono::milliseconds query_timeout{5000};
  int asks_per_second = 200;  // identity asks, all peers together
  PeerIdentities::Options identities;
  /// The own Node's zone (when want_zone) and the Service's UID (the coordinated bursts' key,
  /// topology::ChooseBurstPair) come from two GETs, retried with backoff until they answer.
  std::string namespace_name;
  std::string service;
  std::string node;
  bool want_zone = false;
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{60000};
  std::chrono::milliseconds max_retry_after{300000};
  std::chrono::milliseconds min_publish_interval{1000};  // as DiscoveryOptions's
};

/// The series of DNS discovery, registered while it runs:
///  - podnet_discovery_dns_queries_total{result}: the Service's name asked; result ∈ ok (records,
///    or none) | nxdomain | truncated (a UDP answer with TC, asked again over TCP) |
///    too_many_records (an answer over max_addresses, cut) | servfail | refused | timeout |
///    error (any other failure);
///  - podnet_discovery_identity_asks_total{result}: identity asks to the answered addresses;
///    result ∈ answered | no_identity (a reply without the record: an old exporter, or one
///    that does not know its node yet) | malformed | timeout;
///  - podnet_discovery_identity_node_conflicts: node names claimed from more than one address.
/// The candidates gauge and the GETs' errors go to DiscoveryMetrics as the watch's do.
class DnsDiscoveryMetrics {
 public:
  explicit DnsDiscoveryMetrics(prometheus::Registry& registry);
  ~DnsDiscoveryMetrics();
  DnsDiscoveryMetrics(const DnsDiscoveryMetrics&) = delete;
  DnsDiscoveryMetrics& operator=(const DnsDiscoveryMetrics&) = delete;
  void Query(std::string_view result);
  void Ask(std::string_view result);
  prometheus::Gauge& conflicts() { return *conflicts_; }

 private:
  prometheus::Registry& registry_;
  prometheus::Family<prometheus::Counter>* queries_;
  prometheus::Family<prometheus::Counter>* asks_;
  prometheus::Family<prometheus::Gauge>* conflicts_family_;
  prometheus::Gauge* conflicts_;
};

/// Kubernetes peer discovery from the headless Service's DNS records, on one io_context (the
/// control loop). Every `refresh`: the name's A records (AAAA when there are none) from the
/// nameserver over UDP with EDNS0 (1,200 bytes), over TCP when the answer is truncated (RFC
/// 7766; a headless Service of 3,000 Pods answers ~48 KB). Kubernetes DNS lists the ready
/// Pods the Service selects (the DNS specification for Kubernetes, "Headless Services"), as
/// the watch keeps only ready endpoints. Each new address is asked who it is by its UDP echo
/// responder (PeerIdentities), at most asks_per_second, from a request of
/// proto::echo::kIdentityPodPayloadSize bytes; the identified ones are the Snapshot's
/// endpoints, named after their Pods, so ProbePeersOf, SelectPeers and the coordinated bursts
/// get what the watch would give them (zones known from the identities).
///
/// synced() once the first answer came (NXDOMAIN included: a DaemonSet's first Pod is in no
/// answer until it is ready) and each of its addresses was asked once. Failures keep the last
/// endpoints; every one is counted (DnsDiscoveryMetrics, DiscoveryMetrics for the GETs) and
/// logged at debug. Trust: an address in the answer is a Pod the Service selects, as in the
/// slices; what it says about its node and zone is taken as said, within
/// proto::echo::ValidIdentityName, and two addresses that claim one node are counted.
/// Not thread-safe: use it on its loop.
class DnsDiscovery : public PeerDiscovery {
 public:
  DnsDiscovery(boost::asio::io_context& io, std::unique_ptr<ApiClient> client,
               DnsDiscoveryOptions options, DiscoveryMetrics& metrics,
               DnsDiscoveryMetrics& dns_metrics, std::function<void(const Snapshot&)> on_change,
               const std::vector<Endpoint>& seed = {});
  ~DnsDiscovery() override;

  void Start() override;
  void Stop() override;
  bool synced() const override;
  const Snapshot& snapshot() const override;
  const std::string& last_error() const override;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

/// The A (or AAAA, `v6`) addresses of a whole DNS response, at most `max` (*more set when there
/// were others). Records of other types are skipped; std::nullopt when it does not parse. An
/// IPv4-mapped AAAA record (::ffff:a.b.c.d, RFC 4291 2.5.5.2) is given as the IPv4 address.
std::optional<std::vector<boost::asio::ip::address>> AnswerAddresses(const unsigned char* abuf,
                                                                     int alen, bool v6,
                                                                     std::size_t max, bool* more);

}  // namespace podnet::discovery::kubernetes
