#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string_view>

// `peers.kubernetes.discovery: auto`: which source a Pod takes its peers from, the EndpointSlice
// watch or the Service's DNS records, by the number of ready probe Pods (docs/design.md,
// "Discovery at scale"; the costs behind the threshold: bench/README.md, "What each discovery
// mode costs at 3,000 Pods").

namespace podnet::discovery::kubernetes {

enum class PeerSource { kWatch, kDns };

/// The label value of podnet_discovery_candidates{source}: "watch" or "dns".
constexpr std::string_view PeerSourceName(PeerSource s) {
  return s == PeerSource::kDns ? "dns" : "watch";
}

/// A Service's A records that one DNS message can carry whole: over TCP a message is at most
/// 65,535 bytes (RFC 1035 4.2.2) and each record, its name compressed to a pointer, takes 16
/// bytes, so ~4,090 fit after the question. An answer of kDnsAnswerCeiling records or more may
/// have been cut by the server: the watch then. A watch goes to DNS only below
/// kDnsAnswerRoom, so that a Service near the ceiling does not swing between the two.
inline constexpr std::size_t kDnsAnswerCeiling = 3800;
inline constexpr std::size_t kDnsAnswerRoom = 3400;

/// A Pod on the watch takes the records only after kAutoDwell on it (Pods at the threshold do not
/// swing with every rollout's dip), and after twice as long each time it left records it had
/// taken within one dwell (they disagree with the watch: a wrong name, a DNS that cannot list
/// them), up to kAutoMaxDwell. Back to the watch is at once: the records say too few Pods, or
/// may be cut.
inline constexpr std::chrono::minutes kAutoDwell{10};
inline constexpr std::chrono::hours kAutoMaxDwell{24};

/// An `auto` Pod starts with the DNS records (one question; a small cluster's answer sends it to
/// the watch at once) and takes the watch when they have not synced after this long (no cluster
/// DNS, a resolv.conf that names none): a Pod must not stay unready for want of DNS when the
/// API server can list its peers. Any source taken later that has not synced this long after
/// the switch gives way to the one it replaced.
inline constexpr std::chrono::seconds kAutoFirstAnswerDeadline{60};

/// The source `auto` wants, given the one it `decided` on (std::nullopt: the first DNS answer,
/// not judged yet) and the ready probe Pods (self included) the running source counts:
///  - undecided, or on the watch: DNS when dns_from <= pods < kDnsAnswerRoom, else the watch;
///  - on DNS: the watch when pods < dns_from × 3/4 (hysteresis) or pods >= kDnsAnswerCeiling,
///    else DNS.
/// Pure: the caller applies the dwell and kAutoFirstAnswerDeadline.
constexpr PeerSource AutoPeerSource(std::optional<PeerSource> decided, std::size_t pods,
                                    std::size_t dns_from) {
  if (decided == PeerSource::kDns) {
    return pods * 4 < dns_from * 3 || pods >= kDnsAnswerCeiling ? PeerSource::kWatch
                                                                : PeerSource::kDns;
  }
  return pods >= dns_from && pods < kDnsAnswerRoom ? PeerSource::kDns : PeerSource::kWatch;
}

}  // namespace podnet::discovery::kubernetes
