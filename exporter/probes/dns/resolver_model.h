#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/probes/dns/resolv_conf.h"

namespace podnet::probes::dns {

/// Query types a getaddrinfo(AF_UNSPEC) lookup asks.
enum class QType : std::uint16_t { kA = 1, kAAAA = 28 };
const char* QTypeName(QType t);  // "A" | "AAAA"

/// DNS response codes (RFC 1035 4.1.1, RFC 2136).
enum Rcode : int {
  kNoError = 0,
  kFormErr = 1,
  kServFail = 2,
  kNxDomain = 3,
  kNotImp = 4,
  kRefused = 5
};
/// "NOERROR", "SERVFAIL", ... as DNS names them; "RCODE<n>" for others.
std::string RcodeName(int rcode);

/// One question the model wants on the wire: to nameserver index `server` of the ResolvConf,
/// over UDP or (after a truncated answer, or use-vc) TCP. `id` is the model's handle.
struct WireQuery {
  int id = 0;
  std::string name;  // as sent (a trailing dot is kept when the libc keeps it)
  QType qtype = QType::kA;
  int server = 0;
  bool tcp = false;
};

/// What came back for one WireQuery.
struct Reply {
  enum class Kind {
    kAnswer,       // a parsed response: rcode, ancount, truncated are valid
    kConnRefused,  // ICMP port unreachable / TCP RST (glibc: ECONNREFUSED)
    kNoAnswer,     // the wire layer gave up without a usable response (dropped, garbage)
  };
  Kind kind = Kind::kAnswer;
  int rcode = kNoError;
  int ancount = 0;
  bool truncated = false;
};

/// What the model asks the driver to do next.
struct Actions {
  std::vector<WireQuery> send;  // send these now
  /// Call OnDeadline after this long from now unless the model finishes first (replaces any
  /// earlier deadline); std::nullopt keeps the current one.
  std::optional<std::chrono::milliseconds> wait;
  bool done = false;  // the lookup is over: result() is final; outstanding queries are moot
};

/// The outcome of one lookup, as the metrics' `result` label names it.
enum class Result { kSuccess, kNxDomain, kNoData, kServFail, kTimeout, kError };
const char* ResultName(Result r);  // "success" | "nxdomain" | "nodata" | "servfail" | ...

/// A C library's stub resolver walk for one getaddrinfo(name, AF_UNSPEC) lookup, as an event
/// driven state machine: it decides which questions go out, to which nameserver, when, and
/// when the walk ends; the driver (DnsClient, c-ares) puts them on the wire and feeds replies
/// and deadlines back. No I/O, no clock: everything is relative to the driver's events, so the
/// models are tested table-driven with scripted replies.
///
/// Scope of the models: a process that performs this one lookup (glibc's "switch to
/// single-request after a lost reply" is per process and is not carried between lookups);
/// /etc/hosts and nsswitch are not consulted; `rotate` starts at nameserver 0.
class ResolverModel {
 public:
  virtual ~ResolverModel() = default;
  virtual Actions Start() = 0;
  /// A reply to query `id`. Replies to queries the model no longer waits for are ignored.
  virtual Actions OnReply(int id, const Reply& reply) = 0;
  /// The last `wait` elapsed.
  virtual Actions OnDeadline() = 0;
  virtual Result result() const = 0;
  /// Why the walk ended without a question where the libc sends none (a name it cannot
  /// encode, attempts:0, musl's timeout:0), naming the libc's source; empty otherwise.
  virtual std::string note() const = 0;
  /// Upper bound of the lookup's duration under this configuration (all nameservers silent).
  virtual std::chrono::milliseconds MaxDuration() const = 0;
};

/// Whether `name` can be a DNS question (both libcs' res_mkquery: ns_name.c ns_name_pton for
/// glibc, src/network/res_mkquery.c for musl): one trailing dot allowed, then 1..253 bytes,
/// labels of 1..63 bytes (no empty label).
bool Encodable(std::string_view name);

/// glibc 2.36 (Debian 12) getaddrinfo → nss_dns → resolv/res_query.c __res_context_search →
/// __res_context_querydomain → __res_context_query (A and AAAA as one T_QUERY_A_AND_AAAA
/// exchange) → resolv/res_send.c __res_context_send / send_dg / send_vc:
///  - the as-is name first when dots >= ndots or it ends in a dot (then its answer is final);
///  - then each search domain (any name without a trailing dot) while the answers are
///    NXDOMAIN, NODATA or SERVFAIL; a timeout, REFUSED or other failure ends the walk, after
///    which the as-is name is still tried if it was not yet (unless a "." search entry stood for
///    it, or no-tld-query and the name has no dot); ECONNREFUSED from every server aborts;
///  - per name: A and AAAA together (no-aaaa: A only; single-request[-reopen]: A, then AAAA
///    after A's reply); for attempts × nameservers in order: a server whose replies are all
///    SERVFAIL / NOTIMP / REFUSED, or that does not answer within its timeout
///    (timeout << ns / nscount for the ns-th server, at least 1 s), passes the query on to the
///    next; a truncated UDP answer makes glibc re-ask the same server over TCP (both types);
///    one answer of the pair with the other lost is used as it is;
///  - attempts <= 0: no question at all (res_send.c's try loop never runs; ECONNREFUSED ends
///    the walk); timeout <= 0: 1 s per try (send_dg's floor);
///  - a candidate name that cannot be a question (Encodable) sends nothing: NO_RECOVERY for
///    that name (resolv/res_mkquery.c, ns_name.c).
std::unique_ptr<ResolverModel> MakeGlibcModel(const ResolvConf& conf, std::string name);

/// musl 1.2.3 (Debian 12 musl-tools) getaddrinfo → src/network/lookup_name.c
/// name_from_dns_search → name_from_dns → src/network/res_msend.c __res_msend_rc:
///  - dots >= ndots or a trailing dot: the name alone (trailing dot stripped); otherwise each
///    search domain in order, then the bare name last;
///  - only NXDOMAIN (on A, checked first, or AAAA) continues the walk; NODATA, a timeout or any
///    failure ends it;
///  - per name: A and AAAA to every nameserver at once; the first NOERROR or NXDOMAIN answer of
///    each type is taken; a SERVFAIL answer is re-asked at once (at most 2×questions times per
///    round, as measured on the wire), other rcodes are ignored; unanswered questions are sent
///    again every timeout/attempts until `timeout` has passed. No TCP: a truncated answer is used
///    as is;
///  - timeout:0 sends nothing (the send loop never runs: EAI_AGAIN, result timeout);
///    attempts:0 sends nothing (musl 1.2.3 divides by zero: SIGFPE; result error);
///  - a name of 0 or 255+ bytes or with two trailing dots, or a candidate that cannot be a
///    question (res_mkquery.c), sends nothing and ends the walk (EAI_NONAME, result error); a
///    search domain is tried only when name + domain fit in 255 bytes.
std::unique_ptr<ResolverModel> MakeMuslModel(const ResolvConf& conf, std::string name);

std::unique_ptr<ResolverModel> MakeModel(Libc libc, const ResolvConf& conf, std::string name);

}  // namespace podnet::probes::dns
