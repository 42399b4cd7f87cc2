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
/// Returns the exit code: 0 when the lookup found addresses, 1 otherwise.
int ExplainLookup(const std::string& name, const std::string& resolv_conf_path, Libc libc,
                  std::ostream& out);

}  // namespace podnet::probes::dns
