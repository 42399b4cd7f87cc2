#pragma once

#include <string>

#include "exporter/report/report.h"

namespace podnet::report {

/// `report --format=html`: one self-contained page (UTF-8; inline CSS and SVG, no script, and a
/// Content-Security-Policy that forbids every fetch: it opens the same without a network). In
/// order: the verdict's line after Compare() (VerdictOf), the run, the latency ladder — per
/// latency section (rtt, http, grpc) a picture with a row per table row, ordered same_node,
/// same_zone, cross_zone, unknown: a bar to p50 and a whisker to p90 on one linear ms axis —,
/// the zone matrix (the "zones" section: RTT p50 per source zone × peer zone, darker is slower),
/// then every section's table and notes as ToMarkdown has them (TableOf), and the failures.
///
/// Every number a picture shows is a <text> element carrying where it is in ToJson():
/// data-section (Section::id), data-key (the row's key as a JSON object), data-figure (e.g.
/// p50_seconds) and data-value (the figure's value in its JSON unit and JSON spelling: seconds,
/// "null" when not a number); its text is that value in ms with 3 decimals, or "n<N" for a
/// percentile the samples cannot carry. Every string (names come from Kubernetes or a file
/// anyone wrote) is HTML-escaped: & < > " ' never reach the page as markup.
std::string ToHtml(const Report& report);

/// `s` with & < > " ' as character references: safe in HTML text and in a quoted attribute.
std::string HtmlEscape(const std::string& s);

}  // namespace podnet::report
