#pragma once

#include <iosfwd>
#include <memory>

#include "exporter/app/cli.h"
#include "exporter/config/config.h"

namespace podnet::app {

/// `podnet-exporter report`: one bounded run of the exporter's own probes (App, scheduler,
/// probes: the same code as the daemon, with its burst byte budget), then the report's tables
/// (report/report.h) on `out`, failures also on `err`.
///
/// The run: App without listeners, on a copy of the configuration whose probe intervals are
/// capped at --duration, so every (kind, peer) pair starts at least one round, at the
/// scheduler's random phase, within --duration of the first peer being known (static peers: at
/// once; Kubernetes discovery: its first list). That is the latency phase: burst rounds due in
/// it are held, and start when it ends (bursts fill the queues of the path and would show in
/// every latency figure measured beside them). No other round starts after it; rounds in flight
/// are waited for, at most max(--duration, 30 s) more plus, per held burst round, its stream
/// counts × (jitter + probes.burst.duration + step_timeout) (a round still running then is not
/// counted).
///
/// Returns the exit code: 0 every configured probe got answers from every target (and, with
/// --fail-on-change, the verdict against --baseline names no change), 1 one did not (named in
/// the report and on `err`; it comes before 3), 3 --fail-on-change and at least one figure
/// changed beyond its run-to-run spread (report::VerdictOf; its line is also on `err` whenever
/// there is a baseline), 4 --fail-on-change, no such change, and an incomplete comparison
/// (Verdict::complete false: a section, row or shown figure on one side only, a value null or a
/// spread not finite on one side, or no figure at all; the verdict names them; 3 comes
/// first), 2 a baseline or --input file that cannot be read or is
/// not a report: not a regular file (a directory, a FIFO — never waited on —, a device), larger
/// than report::kMaxReportBytes, not JSON, or a value outside its meaning (report::FromJson);
/// `err` names the file and the reason, with the value's JSON path.
/// `config` is null with --input (no probing).
int RunReport(const Options& options, std::shared_ptr<const config::Config> config,
              std::ostream& out, std::ostream& err);

}  // namespace podnet::app
