#pragma once

#include <optional>
#include <set>

namespace podnet::probes::mtu {

/// One direction's path-MTU search of one round (probes.mtu), over IP packet sizes in bytes (IP
/// and UDP headers included). Pure bookkeeping, no sockets and no time: the probe sends Next(),
/// then reports what became of it. Bounded: at most `max_datagrams` sends.
///
/// Order: the upper bound first (a healthy path is done in one datagram); after a size named by
/// an ICMP error, that size; then the previous round's answer (`hint`) and one byte above it (an
/// unchanged path is confirmed in a few datagrams); then `min` (is the peer there at all?); when
/// `min` does not cross (or an error named less), `floor`, the protocol's smallest MTU (below
/// `min`: a path narrower than `min` is still a path, and its black hole still one); then
/// bisection. A size lost without an error is sent once more before it counts as too big — the
/// upper bound, `min` and `floor` at once, a bisection step when it has become the boundary (the
/// size just above the largest answered) — so one dropped datagram is neither a smaller MTU nor
/// a black hole, and a black hole between 1,280 and 9,001 is found to the byte in ~17 datagrams.
class Search {
 public:
  /// Sizes in IP bytes; `floor` (0: `min`) at most `min`: IPv4 68 (RFC 791: every router
  /// forwards 68 bytes unfragmented), IPv6 1280 (RFC 8200 §5).
  Search(int min, int max, int max_datagrams, int hint = 0, int floor = 0);

  /// The size to send next; std::nullopt when the search is over (found to the byte, the budget
  /// spent, or nothing answered, not even `floor`).
  std::optional<int> Next() const;
  /// Call after sending Next().
  void Sent() { ++sent_; }
  /// A datagram of `size` crossed (a reply to it arrived, late ones too).
  void Answered(int size);
  /// No reply to the datagram of `size` within the timeout, and no error.
  void Lost(int size);
  /// An error said `size` does not fit: an ICMP frag-needed / packet-too-big naming `mtu` (0: none
  /// named, e.g. the responder's kernel refused its reply with EMSGSIZE), or the local kernel.
  /// A named MTU below `floor` is taken as `floor`: the kernel learns no IPv6 path MTU below 1280
  /// (net/ipv6/route.c __ip6_rt_update_pmtu), and no IPv4 path is below 68 (RFC 791; the kernel
  /// learns none below net.ipv4.route.min_pmtu and stops setting DF there, net/ipv4/route.c
  /// __ip_rt_update_pmtu, while the probe's DF stays); named_mtu() keeps what was named.
  void TooBig(int size, int mtu);

  /// The largest size answered (0: none).
  int largest() const { return ok_; }
  /// The smallest MTU an error named this round (0: none).
  int named_mtu() const { return named_; }
  /// A size above largest() was lost twice with no error while largest() crossed.
  bool black_hole() const;
  /// Whether largest() is exact: the next size up is known not to fit (lost twice or refused), or
  /// largest() is the upper bound.
  bool exact() const;
  int datagrams() const { return sent_; }

 private:
  // The smallest size above ok_ that did not cross: refused, lost twice, or lost once (a
  // candidate, sent again before it counts; `*confirmed` says which).
  int Bad(bool* confirmed = nullptr) const;

  int min_, max_, budget_, hint_, floor_;
  int ok_ = 0;         // largest answered
  int named_ = 0;      // smallest MTU named by an error
  int try_named_ = 0;  // a named MTU not yet tried
  int sent_ = 0;
  std::set<int> refused_;  // sizes an error said do not fit
  std::set<int> silent_;   // sizes lost twice with no error
  std::set<int> once_;     // sizes lost once, not yet sent again
};

}  // namespace podnet::probes::mtu
