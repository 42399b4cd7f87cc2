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
  /// The libc sends its query buffer again unchanged, so with the same DNS ID: the `id` of the
  /// first question that buffer went out as (glibc resolv/res_send.c: every try, server and
  /// retry of one __res_context_query; musl src/network/res_msend.c: every round); 0: a new
  /// query, a new ID.
  int same_id_as = 0;
  /// glibc's socket generation: res_send.c send_dg closes and reopens its socket under
  /// single-request-reopen (before the second question, and when a lost reply switches to it);
  /// a reply to the old socket is never read.
  int socket = 0;
  /// The DNS message byte for byte (ID bytes zero) when the libc builds one that is not a
  /// well-formed question (MuslQuery on a name ending in two dots); empty otherwise.
  std::string raw;
  /// glibc: which run of the whole lookup this question belongs to: 0 the first; n after n
  /// answers that did not fit getaddrinfo's buffer (ERANGE: 1,024 bytes << n, answer.h).
  int pass = 0;
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
  /// The response as the socket read it, header included (answer.h reads its records). Empty
  /// in scripted replies: then MakeAnswer(question, rcode, ancount, truncated) stands for it.
  std::string message;
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
/// single-request after a lost reply" is per process: it holds for the rest of one lookup's walk
/// and is not carried between lookups);
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

/// The DNS query musl 1.2.3 builds for `name` (src/network/res_mkquery.c __res_mkquery, as
/// src/network/lookup_name.c name_from_dns calls it: class IN, RD, no AD), ID bytes zero; or
/// std::nullopt where it returns -1 (over 253 bytes after one trailing dot, an empty label, a
/// label over 63 bytes). One trailing dot is dropped; a second one is not checked: it stays as
/// the byte 0x2e where the name's terminating zero belongs, and the message is one byte longer
/// (a malformed question that still goes out: "google.com." + a search entry ".").
std::optional<std::string> MuslQuery(std::string_view name, QType qtype);

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
///  - one usable answer of the pair and the other lost (send_dg's poll times out): the pair is
///    sent again to the same server with the same IDs and a fresh window, one question after the
///    other: the first time on the same socket (switching to single-request), the second time
///    on a new socket (switching to single-request-reopen); the third time the one answer is
///    used. The switch holds for the rest of the walk. single-request-reopen puts the second
///    question of each pair on a new socket. A reply is read only from the socket's server
///    (connected), with the ID and question section of a question outstanding (send_dg,
///    __libc_res_queriesmatch);
///  - attempts <= 0: no question at all (res_send.c's try loop never runs; ECONNREFUSED ends
///    the walk); timeout <= 0: 1 s per try (send_dg's floor);
///  - a candidate name that cannot be a question (Encodable) sends nothing: NO_RECOVERY for
///    that name (resolv/res_mkquery.c, ns_name.c);
///  - the walk ends at the first name answered NOERROR with records (or NXDOMAIN / FORMERR /
///    NOTIMP beside one): nss_dns then reads the answers (GlibcReadAnswers): an address is
///    success; none (a CNAME alone, records of other names or types) is EAI_NONAME (result
///    nxdomain); answers that do not fit getaddrinfo's buffer (1,024 bytes at first)
///    make it run the whole lookup again with twice the buffer (WireQuery::pass), every
///    question of the walk again (sysdeps/posix/getaddrinfo.c gaih_inet).
std::unique_ptr<ResolverModel> MakeGlibcModel(const ResolvConf& conf, std::string name);

/// musl 1.2.3 (Debian 12 musl-tools) getaddrinfo → src/network/lookup_name.c
/// name_from_dns_search → name_from_dns → src/network/res_msend.c __res_msend_rc:
///  - dots >= ndots or a trailing dot: the name alone (trailing dot stripped); otherwise each
///    search domain in order, then the bare name last;
///  - only NXDOMAIN (on A, checked first, or AAAA) continues the walk; NODATA, a timeout or any
///    failure ends it; a NOERROR walk's end is success only with an address in its answers
///    (MuslAddresses: a CNAME alone, NODATA, or a truncated answer holding part of a CNAME
///    chain is EAI_NONAME, result nxdomain);
///  - per name: A and AAAA to every nameserver at once; the first NOERROR or NXDOMAIN answer of
///    each type is taken; a SERVFAIL answer is re-asked at once (at most 2×questions times per
///    round, as measured on the wire), other rcodes are ignored; unanswered questions are sent
///    again (same IDs) every timeout/attempts until `timeout` has passed. No TCP: a truncated
///    answer is used as is. A reply is read when its source address and port are a
///    nameserver's, it has 4 bytes or more and the ID of an unanswered question; its question
///    section is not looked at;
///  - a candidate is name + "." + search entry as written: an entry "." or one ending in a dot
///    gives a name ending in two dots, which res_mkquery sends as a malformed question
///    (MuslQuery) that no server answers usefully: retransmitted until the timeout, then the
///    walk ends (EAI_AGAIN, result timeout);
///  - timeout:0 sends nothing (the send loop never runs: EAI_AGAIN, result timeout);
///    attempts:0 sends nothing (musl 1.2.3 divides by zero: SIGFPE; result error);
///  - a name of 0 or 255+ bytes or with two trailing dots, or a candidate res_mkquery.c refuses
///    (MuslQuery), sends nothing and ends the walk (EAI_NONAME, result error); a search domain
///    is tried only when name + domain fit in 255 bytes.
std::unique_ptr<ResolverModel> MakeMuslModel(const ResolvConf& conf, std::string name);

std::unique_ptr<ResolverModel> MakeModel(Libc libc, const ResolvConf& conf, std::string name);

}  // namespace podnet::probes::dns
