#pragma once

#include <ostream>
#include <string>

#include "exporter/probes/dns/resolv_conf.h"

namespace podnet::probes::dns {

/// `podnet-exporter dns-explain NAME`: performs one lookup of `name` through the `libc` model
/// under the resolv.conf at `resolv_conf_path` (really sent, with c-ares) and prints the walk to
/// `out`: the configuration as that libc reads it, then one line per question — time from the
/// first packet, candidate name, type, nameserver, transport, answer (rcode, answer count, TC)
/// and its time — and a summary (result, questions, NXDOMAIN/NODATA count, duration).
/// Rows are the questions that left the socket, in the order they did; times never precede the
/// first packet. When the libc sends nothing (a name it cannot encode, attempts:0, musl's
/// timeout:0) the libc's reason is printed instead of the table, then the result (0 questions).
/// Returns the exit code: kExplainFound (0) when the lookup found addresses, kExplainNotFound (1)
/// when it did not (NXDOMAIN, NODATA, SERVFAIL, timeout, refused, a name the libc refuses);
/// bad flags are the command line's exit code 2.
inline constexpr int kExplainFound = 0;
inline constexpr int kExplainNotFound = 1;
int ExplainLookup(const std::string& name, const std::string& resolv_conf_path, Libc libc,
                  std::ostream& out);

}  // namespace podnet::probes::dns
