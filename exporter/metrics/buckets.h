#pragma once

#include <vector>

namespace podnet::metrics {

/// Upper bounds, in seconds, of every latency histogram (RTT, request, DNS): the 1-1.25-1.5-2-
/// 2.5-3-4-5-6-8 series per decade from 5 µs to 1 s (54 bounds). Adjacent bounds differ by at
/// most 33.4 %, so a sub-millisecond percentile is read from a bucket at most a third wide
/// (docs/design.md, "Metrics: peer labels and buckets": ≤ 35 % from 10 µs to 100 ms; fortio's
/// 1 ms buckets made sub-ms quantiles fiction).
const std::vector<double>& LatencyBuckets();

/// LatencyBuckets() continued in the same series to 10 s, then 15, 20 and 30 s (67 bounds), for
/// DNS lookups and DNS server round trips: a stub resolver waits RES_TIMEOUT (5 s, resolv.h) per
/// try and retries (attempts, nameservers, search candidates), so a lookup that hits a timeout
/// takes seconds and must land in a finite bucket — with LatencyBuckets() it falls in +Inf and
/// histogram_quantile can only answer "above 1 s".
const std::vector<double>& DnsLatencyBuckets();

}  // namespace podnet::metrics
