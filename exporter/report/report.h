#pragma once

#include <prometheus/metric_family.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exporter/report/cost.h"

namespace podnet::report {

/// `podnet-exporter report`: the benchmark report's tables, computed from what one bounded run
/// of the probes recorded in the metrics registry (prometheus-cpp Collect()). Pure functions of
/// their inputs: no clock, no I/O.

/// One histogram series: cumulative bucket counts by upper bound (ascending, the last +Inf), as
/// prometheus-cpp's ClientMetric::Histogram has them.
struct Buckets {
  std::vector<std::pair<double, double>> cumulative;  // (upper bound in seconds, count ≤ it)
  double count = 0;
  double sum = 0;  // seconds
  /// Adds another series' buckets (same bounds): PromQL's sum by (le).
  void Add(const Buckets& other);
};

/// The q-quantile (0 < q < 1) of `b`, interpolated linearly inside the bucket that holds it, as
/// PromQL's histogram_quantile does (prometheus/promql/quantile.go: bucketQuantile): the lowest
/// bucket starts at 0, a quantile in the +Inf bucket is the highest finite bound. NaN when `b`
/// has no observations. Seconds.
double BucketQuantile(double q, const Buckets& b);

/// The upper bound of the highest bucket with an observation in it: the largest observation is
/// at most this (a histogram keeps no maximum). +Inf when one fell above every finite bound;
/// NaN when empty.
double BucketMaxBound(const Buckets& b);

/// One number of the report and how much it would move between two runs of an unchanged
/// network (its spread, same unit; see docs/design.md, "One-shot report": the spread of each
/// kind of figure), plus, after Compare(), the baseline's value.
struct Figure {
  double value = 0;
  double spread = 0;
  std::optional<double> baseline;
  /// |value − baseline| > max(spread, the baseline's spread): more than the runs' own noise.
  bool beyond_spread = false;
};

/// One row of a table: its key (e.g. path_class=same_zone, connection=keepalive) and figures by
/// name (names carry their unit: p50_seconds, throughput_bits_per_second, ...).
struct Row {
  std::vector<std::pair<std::string, std::string>> key;
  std::map<std::string, Figure> figures;
};

/// One table. `configured` false: the probe kind is off in the configuration (the section is
/// still printed, saying so).
struct Section {
  std::string id;  // rtt, http, grpc, burst, dns, cost, cluster_cost, zones, mtu
  std::string title;
  bool configured = false;
  std::vector<Row> rows;
  std::vector<std::string> notes;  // footnotes: where the numbers come from
};

/// A (probe kind, target) pair that failed: no answer at all, or no round ran.
struct Failure {
  std::string probe;   // a probe kind's name (the kinds: exporter/probes/registry.cc)
  std::string target;  // peer name, or the DNS target (name/form/resolver)
  std::string reason;  // e.g. "100% loss (20 of 20 packets)"
};

/// What the runner knows that the registry does not.
struct RunInfo {
  std::string self_name, self_node, self_zone;
  std::string version;
  std::string started;                             // RFC 3339, UTC
  double duration_seconds = 0;                     // the time rounds were started in
  double price_usd_per_gb = 0.02;                  // --price-per-gb (decimal GB, both ends billed)
  std::vector<std::string> configured;             // probe kinds on in the configuration
  std::map<std::string, double> interval_seconds;  // by kind: the configured interval
  /// Rounds each (kind, target) ran to the end in the run; a target with none failed.
  struct Target {
    std::string probe, target, path_class;
    int rounds = 0;
  };
  std::vector<Target> targets;
  /// The configuration and cluster the "cluster_cost" section is computed from (cost.h);
  /// absent: no such section (a runner that does not know them).
  std::optional<CostInputs> cluster_cost;
};

struct Report {
  /// The JSON's "version"; bumped on an incompatible change (a field changing meaning or going),
  /// not for added sections or figures: version 2 gained "cluster_cost" unchanged.
  static constexpr int kVersion = 2;
  RunInfo run;
  /// Always rtt, http, grpc, burst, dns, cost, in that order; then cluster_cost when
  /// run.cluster_cost is set; then zones (RTT by source_zone and peer_zone: the same samples
  /// as rtt, grouped by zone pair; configured with rtt; not counted by VerdictOf); then mtu
  /// (path MTU by path class and direction; configured with probes.mtu).
  std::vector<Section> sections;
  std::vector<Failure> failures;
  bool compared = false;  // Compare() ran
  std::string baseline_started;
  /// What Compare() could not compare, one entry each, input and baseline in their order:
  /// "section http: not in the input", "RTT cross_zone icmp: not in the baseline" (a row either
  /// side lacks), "RTT same_zone icmp p50_seconds: no value in the input" (null on one side),
  /// "... p99_seconds: spread not finite in the baseline" (+Inf or null where the other side's is
  /// a number). Written to the JSON's verdict; not read back (FromJson leaves it empty).
  std::vector<std::string> uncompared;
};

/// The tables from a registry's Collect(). Series of kinds not in run.configured are ignored.
Report Build(const std::vector<prometheus::MetricFamily>& families, RunInfo run);

/// Sets every figure's baseline and beyond_spread from `baseline` (rows matched by section id
/// and key, figures by name; a figure the baseline lacks has no baseline), and lists in
/// report.uncompared every section, row and shown figure (the Markdown's columns; zones aside,
/// as in VerdictOf) that one side has and the other cannot be compared with, or whose spreads
/// are +Inf or null on both sides. A figure null on both sides, or one Build() never marks
/// (max_seconds, a burst's retransmits and tcp_rtt_seconds) with +Inf spreads on both, is
/// neither compared nor listed; a section on one side only that is off there and has no rows is
/// not listed either. A value that became +Inf (max_seconds) is beyond any finite spread.
void Compare(Report& report, const Report& baseline);

/// Number of figures Compare() marked beyond spread.
int BeyondSpread(const Report& report);

/// The fewest samples a q-quantile (0 < q < 1) of a histogram is shown from: the smallest n
/// for which the q-quantile lies between the smallest and the largest of n samples with
/// probability at least 95 % (1 − q^n − (1 − q)^n ≥ 0.95: a distribution-free confidence
/// interval exists among the samples at all). 6 for p50, 29 for p90, 299 for p99. Below it,
/// Build() leaves the percentile out (NaN: null in JSON, "n<N" in the Markdown).
int MinSamplesFor(double q);

/// One figure Compare() marked beyond spread, with where it is.
struct Change {
  std::string section;  // Section::id
  std::vector<std::pair<std::string, std::string>> key;
  std::string figure;  // its name in Row::figures, e.g. p50_seconds
  double value = 0, baseline = 0;
  double spread = 0;  // this run's spread (the baseline's is not kept), the figure's unit
};

/// What a comparison found, over the figures the tables show (the Markdown's columns) whose
/// value and baseline are both numbers and that can be marked (a finite spread: a burst's TCP
/// RTT never is).
struct Verdict {
  int figures = 0;                      // compared
  std::vector<Change> changed;          // beyond spread, the largest |change| / spread first
  std::vector<std::string> uncompared;  // Report::uncompared
  /// Every figure either side shows was compared (uncompared is empty) and there was at least
  /// one: what `report --fail-on-change` needs to say "no change" (exit 4 otherwise,
  /// app/report_run.h).
  bool complete = false;
  /// One line: "2 of 37 figures changed beyond their run-to-run spread: RTT cross_zone icmp
  /// p50 ms 0.550 → 0.776 (+41 %); ..." (at most three named, "and N more"), or "No change
  /// beyond the run-to-run spread in 37 figures.". When not complete, it begins "Incomplete
  /// comparison: 2 could not be compared (section http: not in the input; ...). " (at most
  /// three named), or "Incomplete comparison: no figure on either side. ". Empty when the
  /// report was not compared.
  std::string line;
};

/// The verdict of a report after Compare(); figures == 0 and an empty line before it.
Verdict VerdictOf(const Report& report);

/// The largest report file --input and --baseline read, bytes: ten times what a report of 1,000
/// peers weighs with every kind configured and every peer failing, the heaviest real one
/// (`--format=json`: 1,480,073 bytes; 552,904 when every peer answers; report_test.cc,
/// TheFileCapIsTenThousandPeerReports, measures it again and holds the cap to 10–20 times it).
/// The largest values FromJson accepts where no run can measure more: counts, bytes, ratios
/// per lookup and prices (2^53: past it a double no longer counts by one), a latency in seconds
/// (an hour: every probe's timeout is seconds), a throughput in bits per second (10 Tbit/s).
inline constexpr double kMaxCount = 9007199254740992.0;
inline constexpr double kMaxSeconds = 3600;
inline constexpr double kMaxBitsPerSecond = 1e13;
/// The largest MTU a report holds, bytes: Linux's loopback (65,536), the largest a link has.
inline constexpr double kMaxMtuBytes = 65536;

inline constexpr std::size_t kMaxReportBytes = 16 * 1024 * 1024;
/// Every string FromJson reads is cut to this many bytes (a name is at most 253, a note about
/// 600).
inline constexpr std::size_t kMaxReportTextBytes = 4096;

/// The JSON form (docs/design.md, "One-shot report": the schema, version 2). After Compare() it
/// also holds "verdict": {figures, complete, summary, changed: [{section, key, figure, value,
/// baseline, spread}], uncompared: [text]} (VerdictOf; never read back).
nlohmann::json ToJson(const Report& report);
/// Parses ToJson's output, as hostile input (a file anyone may have written). std::nullopt and
/// *error on a document that is not a version-2 report, and on any value outside its meaning,
/// the error starting with the value's JSON path
/// ("sections[0].rows[1].figures.peers.value: -5 is negative (a count)"):
///  - "version" another number than the integer 2 (2.5 is not version 2), or absent;
///  - a missing key, or a value of another JSON type than ToJson writes;
///  - counts (peers, packets_sent, requests, samples, lookups, targets' rounds, ...) negative,
///    fractional rounds, or not finite; loss_ratio outside 0 … 1; seconds, bytes, throughput
///    and prices negative; null (nothing measured) or "+Inf" where the figure cannot be that
///    (only percentiles and ratios may be null, max_seconds and spreads "+Inf");
///  - values no run can measure (kMaxCount, kMaxSeconds, kMaxBitsPerSecond, kMaxMtuBytes): a
///    count, a byte count, a ratio per lookup or a price over 2^53, a latency over an hour, a
///    throughput over 10 Tbit/s, an MTU over 65,536 bytes; a spread over what its figure may be
///    (a count's over 2^53, ...);
///  - a section id that an earlier section has ("sections[3].id: repeats the id of
///    sections[0]").
/// Strings (names, notes, reasons) come back through topology::SafeText, at most
/// kMaxReportTextBytes: control characters (a terminal's escape sequences), NUL and invalid
/// UTF-8 shown as \xNN, never passed on to the Markdown.
std::optional<Report> FromJson(const nlohmann::json& j, std::string* error);

/// A section's table as ToMarkdown prints it: the key labels' and the columns' headers, and per
/// row its key values then its cells ("0.776 (+0.226, +41% !)" after Compare(), "n<6" for a
/// percentile the samples cannot carry, "–" for a figure the row lacks). No rows for a section
/// that is not configured or measured nothing.
struct Table {
  std::vector<std::string> header;
  std::size_t key_columns = 0;  // the first header entries and cells of a row: the key
  std::vector<std::vector<std::string>> rows;
};
Table TableOf(const Section& section);

/// The Markdown tables (GitHub-flavoured): times in ms, throughput in Gbit/s, bytes in MB. After
/// Compare(): the verdict's line first, and the baseline's change in each cell that moved at
/// its precision ("0.776 (+0.226, +41% !)"; a cell that did not move is the value alone).
std::string ToMarkdown(const Report& report);

}  // namespace podnet::report
