#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "exporter/config/units.h"
#include "exporter/probes/dns/resolv_conf.h"

namespace podnet::probes::dns {

/// probes.dns: every `interval`, each name is looked up as written and in its absolute form
/// (a trailing dot), once per resolver model, under the resolv.conf at `resolv_conf` (re-read
/// every round, as the libcs notice a changed file); and each nameserver of that file is asked
/// directly for the first name's absolute form (podnet_dns_server_rtt_seconds).
struct DnsOptions {
  config::Duration interval = std::chrono::seconds(30);
  std::string resolv_conf = "/etc/resolv.conf";
  std::vector<Libc> resolvers{Libc::kGlibc, Libc::kMusl};
  std::vector<std::string> names;

  bool operator==(const DnsOptions&) const = default;
};

}  // namespace podnet::probes::dns
