#include "exporter/config/metric_families.h"

#include <array>

namespace podnet::config {

namespace {

constexpr std::array kFamilies = {
    MetricFamilyEntry{"podnet_burst_budget_remaining_bytes", "burst", true},
    MetricFamilyEntry{"podnet_burst_interval_min_throughput_bytes_per_second", "burst", true},
    MetricFamilyEntry{"podnet_burst_pairs_skipped_total", "burst", true},
    MetricFamilyEntry{"podnet_burst_path_mtu_bytes", "burst", true},
    MetricFamilyEntry{"podnet_burst_retransmits_total", "burst", true},
    MetricFamilyEntry{"podnet_burst_sender_cpu_seconds_total", "burst", true},
    MetricFamilyEntry{"podnet_burst_sent_bytes_total", "burst", true},
    MetricFamilyEntry{"podnet_burst_snd_cwnd_bytes", "burst", true},
    MetricFamilyEntry{"podnet_burst_tcp_rtt_seconds", "burst", true},
    MetricFamilyEntry{"podnet_burst_throughput_bytes_per_second", "burst", true},
    MetricFamilyEntry{"podnet_dns_lookup_duration_seconds", "dns", true},
    MetricFamilyEntry{"podnet_dns_lookup_sampled", "dns", true},
    MetricFamilyEntry{"podnet_dns_lookups_total", "dns", true},
    MetricFamilyEntry{"podnet_dns_queries_per_lookup", "dns", true},
    MetricFamilyEntry{"podnet_dns_queries_total", "dns", true},
    MetricFamilyEntry{"podnet_dns_responses_total", "dns", true},
    MetricFamilyEntry{"podnet_dns_server_rtt_seconds", "dns", true},
    MetricFamilyEntry{"podnet_grpc_request_duration_seconds", "grpc", true},
    MetricFamilyEntry{"podnet_grpc_requests_total", "grpc", true},
    MetricFamilyEntry{"podnet_http_connect_duration_seconds", "http", false},
    MetricFamilyEntry{"podnet_http_late_requests_total", "http", true},
    MetricFamilyEntry{"podnet_http_reconnects_total", "http", true},
    MetricFamilyEntry{"podnet_http_request_duration_seconds", "http", true},
    MetricFamilyEntry{"podnet_http_requests_total", "http", true},
    MetricFamilyEntry{"podnet_http_time_to_first_byte_seconds", "http", false},
    MetricFamilyEntry{"podnet_path_mtu_black_hole", "mtu", true},
    MetricFamilyEntry{"podnet_path_mtu_bytes", "mtu", true},
    MetricFamilyEntry{"podnet_path_mtu_icmp_bytes", "mtu", true},
    MetricFamilyEntry{"podnet_path_mtu_interface_bytes", "mtu", true},
    MetricFamilyEntry{"podnet_rtt_duplicate_replies_total", "rtt", true},
    MetricFamilyEntry{"podnet_rtt_late_replies_total", "rtt", true},
    MetricFamilyEntry{"podnet_rtt_packets_received_total", "rtt", true},
    MetricFamilyEntry{"podnet_rtt_packets_sent_total", "rtt", true},
    MetricFamilyEntry{"podnet_rtt_reordered_replies_total", "rtt", true},
    MetricFamilyEntry{"podnet_rtt_round_median_seconds", "rtt", true},
    MetricFamilyEntry{"podnet_rtt_round_min_seconds", "rtt", true},
    MetricFamilyEntry{"podnet_rtt_seconds", "rtt", true},
    MetricFamilyEntry{"podnet_rtt_timestamps_total", "rtt", true},
    MetricFamilyEntry{"podnet_service_backend_zones_expired_total", "service", true},
    MetricFamilyEntry{"podnet_service_request_errors_total", "service", true},
    MetricFamilyEntry{"podnet_service_requests_total", "service", true},
    MetricFamilyEntry{"podnet_service_rtt_seconds", "service", true},
};

}  // namespace

std::span<const MetricFamilyEntry> MetricFamilies() { return kFamilies; }

std::set<std::string, std::less<>> DefaultFamiliesOff() {
  std::set<std::string, std::less<>> off;
  for (const auto& f : kFamilies) {
    if (!f.on_by_default) off.emplace(f.name);
  }
  return off;
}

}  // namespace podnet::config
