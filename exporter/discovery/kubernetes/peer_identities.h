#pragma once

#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <vector>

#include "exporter/discovery/kubernetes/resources.h"

namespace podnet::discovery::kubernetes {

/// Who answers at each address of the Service's DNS records, asked from the address itself
/// (the UDP echo identity record, wire/echo.h: node, zone, Pod). Pure bookkeeping, no I/O:
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
  /// A reply from `address` saying `identity` (names already checked by wire::echo); the
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

}  // namespace podnet::discovery::kubernetes
