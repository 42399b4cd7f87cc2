#pragma once

#include <vector>

namespace podnet::metrics {

/// Upper bounds, in seconds, of the RTT, HTTP, gRPC and Service latency histograms: the E6
/// preferred numbers (IEC 60063: 1, 1.5, 2.2, 3.3, 4.7, 6.8) per decade from 10 µs to 1 s, 31
/// bounds, so 34 series a histogram (buckets, +Inf, _sum, _count). Adjacent bounds differ by at
/// most 50 %: a quantile read from them is within a bucket of at most half its value, which is
/// what a latency distribution per (peer zone, path class) needs; a 20 µs change of one peer is
/// read from the exact round gauges (podnet_rtt_round_median_seconds), not from buckets
/// (docs/design.md, "Metrics: peer labels and buckets"). A sample below 10 µs counts in the
/// first bucket, one above 1 s in +Inf (every probe's timeout is at most 1 s by default).
const std::vector<double>& LatencyBuckets();

/// Upper bounds, in seconds, of DNS lookups and DNS server round trips: 1-2.5-5 per decade from
/// 100 µs to 1 s, then 5, 10 and 30 s (16 bounds, 19 series). A lookup answered by a cache on
/// the path takes 0.1-5 ms, one that leaves the cluster 5-100 ms; a stub resolver waits
/// RES_TIMEOUT (5 s, resolv.h) per try before it retries, so (5, 10] s is "one try timed out"
/// and (10, 30] more than one (30 s: musl's whole budget, timeout x attempts); (1, 5] is slow
/// without a lost try.
const std::vector<double>& DnsLatencyBuckets();

}  // namespace podnet::metrics
