#pragma once

// PromQL's grouping over one registry's collected families, for the report's sections
// (sections.cc): `sum by (...)` of counters and gauges, `sum by (..., le)` of histograms, and
// the distinct values of a label per group. Internal to the report module.

#include <prometheus/metric_family.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "exporter/report/report.h"

namespace podnet::report {

using Labels = std::map<std::string, std::string>;
/// A group's key: the values of the labels grouped by, in their order ("" where absent).
using Key = std::vector<std::string>;

/// sum by (by) (name{match}) of a counter, gauge or untyped family; empty when `fams` has no
/// family `name`. Values in the family's unit.
std::map<Key, double> SumBy(const std::vector<prometheus::MetricFamily>& fams,
                            const std::string& name, const std::vector<std::string>& by,
                            const Labels& match = {});

/// sum by (by, le) (name_bucket) of a histogram family: each group's buckets added
/// (Buckets::Add). Empty when `fams` has no family `name`.
std::map<Key, Buckets> HistBy(const std::vector<prometheus::MetricFamily>& fams,
                              const std::string& name, const std::vector<std::string>& by);

/// The distinct values of `label` per group of family `name` (e.g. peers per path class).
std::map<Key, std::set<std::string>> DistinctBy(const std::vector<prometheus::MetricFamily>& fams,
                                                const std::string& name,
                                                const std::vector<std::string>& by,
                                                const std::string& label);

}  // namespace podnet::report
