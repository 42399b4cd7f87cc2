#include "exporter/config/probe_options.h"

namespace podnet::probes::rtt {

const char* RttProtocolName(RttProtocol p) { return p == RttProtocol::kIcmp ? "icmp" : "udp"; }

}  // namespace podnet::probes::rtt

namespace podnet::probes::dns {

const char* LibcName(Libc l) { return l == Libc::kGlibc ? "glibc" : "musl"; }

std::optional<Libc> ParseLibc(std::string_view s) {
  if (s == "glibc") return Libc::kGlibc;
  if (s == "musl") return Libc::kMusl;
  return std::nullopt;
}

}  // namespace podnet::probes::dns

namespace podnet::probes::service {

const char* ServiceProtocolName(ServiceProtocol p) {
  return p == ServiceProtocol::kUdp ? "udp" : "http";
}

}  // namespace podnet::probes::service
