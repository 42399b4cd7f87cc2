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
#include "exporter/discovery/kubernetes/peer_identities.h"
#include "exporter/discovery/kubernetes/resources.h"

// Peer discovery through the headless Service's DNS records instead of an EndpointSlice watch
// (docs/design.md, "Discovery at scale"): the API server's cost per Pod stays two GETs (the
// own Node's zone, the Service's UID) whatever the cluster's size, where a watch is sent every
// slice write of every rollout.

namespace podnet::discovery::kubernetes {

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
/// wire::echo::kIdentityPodPayloadSize bytes; the identified ones are the Snapshot's
/// endpoints, named after their Pods, so ProbePeersOf, SelectPeers and the coordinated bursts
/// get what the watch would give them (zones known from the identities).
///
/// synced() once the first answer came (NXDOMAIN included: a DaemonSet's first Pod is in no
/// answer until it is ready) and each of its addresses was asked once. Failures keep the last
/// endpoints; every one is counted (DnsDiscoveryMetrics, DiscoveryMetrics for the GETs) and
/// logged at debug. Trust: an address in the answer is a Pod the Service selects, as in the
/// slices; what it says about its node and zone is taken as said, within
/// wire::echo::ValidIdentityName, and two addresses that claim one node are counted.
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
