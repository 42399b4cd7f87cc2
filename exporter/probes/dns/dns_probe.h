#pragma once

#include <cstddef>
#include <memory>

#include "exporter/config/kinds/dns.h"
#include "exporter/probes/probe.h"
#include "exporter/probes/series_estimate.h"

namespace podnet::probes::dns {

// The options this kind reads (its section of the configuration: config/kinds/dns.h).
using config::kinds::dns::ClusterDnsOptions;
using config::kinds::dns::DnsOptions;
using config::kinds::dns::DnsSampleOptions;
using config::kinds::dns::Libc;

/// The DNS amplification probe kind (probes.dns). Its targets are not peers: one per
/// (name, form, resolver) — form "as_written" or "absolute" — plus one "servers" target that
/// times each nameserver directly. Each round performs one lookup through the resolver model
/// (resolver_model.h), which decides every question; c-ares puts them on the wire.
///
/// Series (labels name, form, resolver): podnet_dns_lookup_duration_seconds (histogram),
/// podnet_dns_lookups_total{result}, podnet_dns_queries_total{qtype},
/// podnet_dns_responses_total{rcode} (rcode "TIMEOUT" for a question unanswered when the lookup
/// ended), podnet_dns_queries_per_lookup (gauge, last lookup); podnet_dns_server_rtt_seconds
/// {server, server_zone, path}: each nameserver of resolv.conf (server_zone "", path "unknown":
/// an address such as the kube-dns ClusterIP is not one replica) and each cluster DNS replica of
/// ProbeEnv::dns_servers (its EndpointSlice's zone and the path class from this Pod); a server
/// that is no longer in either, or whose labels changed, loses its series at the next round's
/// start; podnet_probe_{sent,received}_bytes_total{probe="dns"} (DNS messages + IP/UDP or
/// IP/TCP headers, without TCP handshakes); podnet_probe_errors_total{probe="dns"} with reason
/// "resolv_conf" (unreadable file: libc defaults used), "channel" (c-ares setup failed),
/// "server_no_answer", "server_error_rcode" (a nameserver answered SERVFAIL, REFUSED or another
/// error rcode: not timed) or "servers_over_cap" (once per round while replicas beyond
/// cluster_dns.max_servers are left out).
///
/// With a sample (DnsOptions::sample) and discovered probe Pods (ProbeEnv::probe_pods), each
/// lookup target runs its round only while this Pod is one of its zone's sample of the period
/// (topology::InZoneSample, keyed by ProbeEnv::service_uid, read at each round's start); outside
/// it a round sends nothing and removes the target's series (they start from zero when the Pod
/// is drawn again). The servers target runs on every Pod and sets podnet_dns_lookup_sampled
/// (no labels: 1 in the sample or without one, else 0).
std::shared_ptr<ProbeKind> MakeDnsKind(const DnsOptions& options, ProbeEnv& env);

/// The series this kind exports from one Pod, once every probe has run a round and every answer
/// was the healthy one: its families into `n` (probes/series_estimate.h); returns how many
/// podnet_probe_sent_bytes_total series it adds (as many received). `c` turns the kind on.
std::size_t CountSeries(const config::Config& c, SeriesCounter& n);

/// Builds the query name of a form: "absolute" appends a trailing dot when there is none.
std::string FormName(const std::string& name, bool absolute);

/// The question every nameserver and cluster DNS replica is timed with
/// (podnet_dns_server_rtt_seconds): a name that exists, so that each server answers it from its
/// data as it answers the Pods, not with NXDOMAIN. `kubernetes.default.svc.<zone>.` (the API
/// server's Service, which every cluster has: Kubernetes DNS-Based Service Discovery
/// specification, 2.3.1) where `search` (resolv.conf's, in order) holds `svc.<zone>`, as kubelet
/// writes it into a ClusterFirst Pod's resolv.conf (`<namespace>.svc.<zone> svc.<zone> <zone>`:
/// that triple first, so that namespace `svc`'s first entry does not pass for it);
/// else the absolute form of `first_name` (the first of probes.dns.names). A trailing dot on a
/// search entry is dropped.
std::string ServerQuestion(const std::vector<std::string>& search, const std::string& first_name);

}  // namespace podnet::probes::dns
