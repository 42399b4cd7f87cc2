#pragma once

#include <boost/asio/io_context.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "exporter/probes/dns/lookup.h"
#include "exporter/probes/dns/resolv_conf.h"

namespace podnet::probes::dns {

/// `podnet-exporter dns-explain NAME`: performs one lookup of `name` through each model of
/// `libcs` (glibc and musl by default, one after the other) under the resolv.conf at
/// `resolv_conf_path` (really sent, with c-ares) and prints, per libc, the walk to `out`: the
/// configuration as that libc reads it, then one line per question — time from the first
/// packet, type, candidate name, nameserver, transport, answer (rcode, answer count, TC) and its
/// time — each followed by a "why:" line naming the rule that sent it (dots vs ndots, search
/// list entry and where the list came from, retry, next nameserver, TCP after TC), the search
/// entries the libc skipped and why, a summary (result, questions, NXDOMAIN/NODATA count,
/// duration) and what the alternatives would cost in questions: the name with a trailing dot,
/// and ndots lowered to the name's dot count (see ReplayWalk). With two libcs a side-by-side
/// table of both ends the output.
/// Rows are the questions that left the socket, in the order they did; times never precede the
/// first packet. When the libc sends nothing (a name it cannot encode, attempts:0, musl's
/// timeout:0) the libc's reason is printed instead of the table, then the result (0 questions).
/// Returns the exit code: kExplainFound (0) when every libc's lookup found addresses,
/// kExplainNotFound (1) when one did not (NXDOMAIN, NODATA, SERVFAIL, timeout, refused, a name
/// the libc refuses); bad flags are the command line's exit code 2.
inline constexpr int kExplainFound = 0;
inline constexpr int kExplainNotFound = 1;
int ExplainLookup(const std::string& name, const std::string& resolv_conf_path,
                  const std::vector<Libc>& libcs, std::ostream& out);

/// The question count of a walk the model would make, and its result.
struct ReplayedWalk {
  int questions = 0;
  Result result = Result::kError;
  /// Some question was not in the walk it replays: its reply was taken as NXDOMAIN (from a
  /// server that answered in that walk) rather than known.
  bool assumed = false;
};

/// Runs the `libc` model for `name` under `conf` without I/O, answering each question it asks
/// with the reply the same question (name without a trailing dot, case-insensitive; type;
/// nameserver; transport) got in `seen`, a real walk: a question `seen` sent that got no reply
/// gets none (the model's deadline passes); a question `seen` never sent gets what its
/// nameserver gave every question of `seen` when that was always a refused connection or
/// always silence, and NXDOMAIN otherwise (`assumed`). The cost of an alternative (a trailing
/// dot, another ndots) in questions, from what the nameservers answered. Bounded: 10,000 model
/// steps.
ReplayedWalk ReplayWalk(const ResolvConf& conf, Libc libc, const std::string& name,
                        const LookupOutcome& seen);

/// One libc's part of dns-explain for `conf` (read from `source`, e.g. the path, as the
/// header line names it; `search_origin` says where the search list came from when not from a
/// `search` line, e.g. "the domain line", else empty; `readable`: false adds "(unreadable:
/// defaults)"). Runs the lookup on `io` (polling it
/// until the lookup ends: the model's MaxDuration + 2 s at most).
struct ExplainedWalk {
  LookupOutcome outcome;
  ReplayedWalk trailing_dot;  // questions == -1: the name already ends in a dot
  int lower_ndots = -1;       // -1: the name already goes out as written first
  ReplayedWalk with_lower_ndots;
  std::vector<std::string> rules;  // one per outcome.queries row, as printed after "why: "
};
ExplainedWalk ExplainWalk(boost::asio::io_context& io, const ResolvConf& conf, Libc libc,
                          const std::string& name, const std::string& source,
                          const std::string& search_origin, std::ostream& out,
                          bool readable = true);

/// Where `libc` takes the search list from in resolv.conf text `text`: "the domain line" when
/// the last of the domain/search lines is `domain`, "LOCALDOMAIN" when glibc takes it from the
/// environment, "" for a `search` line or none.
std::string SearchOrigin(const std::string& text, Libc libc, const config::EnvLookup& env);

}  // namespace podnet::probes::dns
