#pragma once

#include <vector>

namespace podnet::metrics {

/// Upper bounds, in seconds, of every latency histogram (RTT, request, DNS): the 1-1.25-1.5-2-
/// 2.5-3-4-5-6-8 series per decade from 5 µs to 1 s (54 bounds). Adjacent bounds differ by at
/// most 33.4 %, so a sub-millisecond percentile is read from a bucket at most a third wide
/// (DESIGN.md: ≤ 35 % from 10 µs to 100 ms; fortio's 1 ms buckets made sub-ms quantiles fiction).
const std::vector<double>& LatencyBuckets();

}  // namespace podnet::metrics
