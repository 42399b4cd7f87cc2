#pragma once

#include <boost/asio/ip/address.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/config/env.h"
#include "exporter/config/kinds/dns.h"

namespace podnet::probes::dns {

// The options this kind reads (its section of the configuration: config/kinds/dns.h).
using config::kinds::dns::Libc;
using config::kinds::dns::LibcName;
using config::kinds::dns::ParseLibc;

/// Which C library's reading of resolv.conf(5) to apply. Each reads only what it honours.

/// musl reads resolv.conf with fgets into a 256-byte buffer: a line with more bytes than this
/// before its '\n' is skipped whole (src/network/resolvconf.c).
inline constexpr std::size_t kMuslLineMax = 254;

/// /etc/resolv.conf as one C library sees it, byte for byte. docs/dns.md's table "resolv.conf as
/// each model reads it" lists every option, bound and limit with its source line.
///
/// glibc 2.36 (resolv/res_init.c: __res_vinit, res_setoptions; resolv/resolv_conf.c):
///  - lines of any length ('\n' ends one; a '\r' is an ordinary byte); `#` or `;` in column 1
///    is a comment; a keyword counts at the start of a line followed by ' ' or '\t'.
///  - `nameserver`: the word up to " \t\n"; IPv4 as inet_aton reads the whole word, else IPv6
///    with an optional `%scope` (interface name for link-local, else a number; an unknown
///    scope is ignored); at most 3 (MAXNS); none = 127.0.0.1.
///  - `domain X` and `search X Y ...`: the last such line wins; `domain` is a one-entry list;
///    the search list is split on ' ' and '\t' only (a CRLF file leaves "b.test\r").
///  - `options` (and RES_OPTIONS, after the file): words split on ' ' and '\t', matched by
///    prefix; ndots:N = atoi, > 15 → 15, a negative value keeps its low 4 bits (res_state's
///    `unsigned ndots:4`); timeout:N (> 30 → 30; <= 0 behaves as 1 s in send_dg); attempts:N
///    (> 5 → 5; <= 0 → no question is sent); rotate, edns0, single-request-reopen,
///    single-request, no-tld-query (or no_tld_query), use-vc, trust-ad, no-aaaa.
///  - LOCALDOMAIN in the environment replaces the search list (blank-separated).
/// musl 1.2.3 (src/network/resolvconf.c __get_resolv_conf; lookup_ipliteral.c; lookup_name.c):
///  - a line longer than kMuslLineMax bytes is skipped; a keyword is followed by isspace(3).
///  - `nameserver` at most 3, none = 127.0.0.1; IPv4 (inet_aton) or IPv6 with `%scope`
///    (digits, or an interface name on a link-local address only; unknown: line dropped).
///  - `domain`/`search`: the rest of the line, the last wins, split on isspace ('\r' too).
///  - `options`: strstr anywhere on the line for ndots: (cap 15), attempts: (cap 10, 0 divides
///    by zero in res_msend.c), timeout: (cap 60, 0 sends nothing); a digit must follow the
///    colon. No environment, no flags.
struct ResolvConf {
  struct Nameserver {
    boost::asio::ip::address address;
    std::uint16_t port = 53;
    bool operator==(const Nameserver&) const = default;
  };
  std::vector<Nameserver> nameservers;
  std::vector<std::string> search;  // in order, as written (a "." entry stays ".")
  int ndots = 1;
  int timeout_s = 5;  // per try (glibc: RES_TIMEOUT), whole exchange (musl)
  int attempts = 2;
  bool rotate = false;
  bool single_request = false;
  bool single_request_reopen = false;
  bool edns0 = false;
  bool use_vc = false;
  bool no_aaaa = false;
  bool trust_ad = false;
  bool no_tld_query = false;

  bool operator==(const ResolvConf&) const = default;
};

/// Parses resolv.conf text the way `libc` does. Never fails: what libc ignores is ignored.
/// `env` provides LOCALDOMAIN and RES_OPTIONS (glibc only); pass an empty lookup to ignore them.
ResolvConf ParseResolvConf(std::string_view text, Libc libc, const config::EnvLookup& env);

/// Reads and parses `path`. A missing or unreadable file is an empty one (libc's defaults),
/// as both libcs treat it; *readable is set to whether it could be read.
ResolvConf LoadResolvConf(const std::string& path, Libc libc, const config::EnvLookup& env,
                          bool* readable = nullptr);

}  // namespace podnet::probes::dns
