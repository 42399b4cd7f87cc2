#pragma once

#include <boost/asio/ip/address.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/config/env.h"

namespace podnet::probes::dns {

/// Which C library's reading of resolv.conf(5) to apply. Each reads only what it honours.
enum class Libc { kGlibc, kMusl };
const char* LibcName(Libc l);                       // "glibc" | "musl"
std::optional<Libc> ParseLibc(std::string_view s);  // inverse of LibcName

/// /etc/resolv.conf as one C library sees it.
///
/// glibc (resolv/res_init.c: __res_vinit, res_setoptions; glibc 2.36):
///  - `nameserver` IPv4 or IPv6 literal (an IPv6 `%scope` is dropped), at most 3 (MAXNS); more
///    are ignored; none = 127.0.0.1 (and ::1 is not added).
///  - `domain X` and `search X Y ...`: the last such line wins; `domain` is a one-entry list.
///  - `options` (and the RES_OPTIONS environment variable, applied after the file):
///    ndots:N (cap 15), timeout:N (cap 30), attempts:N (cap 5), rotate, single-request,
///    single-request-reopen, edns0, use-vc, no-aaaa, trust-ad, no-tld-query; unknown ones ignored.
///  - LOCALDOMAIN in the environment replaces the search list (blank-separated).
///  - Keywords count only at the start of a line, followed by a blank; `#` and `;` start a
///    comment line.
/// musl (src/network/resolvconf.c: __get_resolv_conf; musl 1.2.3):
///  - `nameserver` at most 3, none = 127.0.0.1; `domain`/`search` the last wins;
///    `options` ndots (cap 15), attempts (cap 10), timeout (cap 60) only; no environment.
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
