#pragma once

#include <prometheus/registry.h>

#include <boost/asio/ip/address.hpp>
#include <memory>
#include <vector>

#include "exporter/config/kinds/burst.h"

namespace podnet::responders {

/// The iperf3-compatible TCP server (responders.burst, default port 5201) that peers' burst
/// probes — and a stock `iperf3 -c` — test against. TCP, forward direction only (the client
/// sends); a test asking for UDP/SCTP, reverse or bidirectional mode gets ACCESS_DENIED, one
/// longer than max_duration (or unbounded: -n/-k) SERVER_ERROR IEDURATION, more than
/// max_streams SERVER_ERROR IENUMSTREAMS, and a client that finds no slot free (max_clients
/// tests run) ACCESS_DENIED (what iperf3 -s answers when busy), after a wait of up to 3 s.
///
/// Who may test (`clients`): with "probe_pods" (the default) only the addresses AdmitSources
/// last listed — every probe Pod discovery lists, this one included, and the static peers; none
/// before the first list — and any source with "any" (ad-hoc `iperf3 -c`). A stranger's
/// connection is closed as it is accepted, before its cookie: it holds nothing, and a stock
/// client reports the control socket closed. Source addresses can be shared or spoofed (a SNAT,
/// a reused Pod IP, a hostNetwork Pod), so every admitted source still gets the bounds below.
///
/// Any admitted source can connect, so no client may hold a slot without using it, and the
/// slots are shared by source address:
///  - Every step has a deadline near what a real client needs (measured for stock iperf3 3.12
///    and our own client by bench/iperf3_step_times.py; each at least 10x that over a 100 ms
///    RTT path): the cookie 2 s after connecting, the parameters 2 s after PARAM_EXCHANGE, the
///    streams 2 s + 100 ms per stream after CREATE_STREAMS, TEST_END by time + omit + 2 s, the
///    results and IPERF_DONE 2 s after EXCHANGE_RESULTS. The data phase must bring at least
///    128 KiB (one iperf3 block) in every 2 s, or the test has stalled: a source trickling
///    1 byte/s loses its slot after 2 s, not after the test's duration.
///  - Before its cookie a connection holds no slot: at most 16 wait per source address and 64
///    in all; at either limit one makes room for the new one (the source's own oldest; at the
///    overall limit the oldest of the source with the most waiting).
///  - With the cookie, a new test asks BurstAdmission (burst_admission.h) for a slot: free
///    slots are taken at once; with none free a client waits up to 3 s in line (one connection
///    per source; 16 in all), sources that have not just tested and that completed a test in
///    the last hour first. A test that fails (any deadline, the data floor, a client that broke
///    off or sent nonsense) penalizes its source for an hour: refused while no slot is free,
///    and its running tests give way (preempted) to any waiting source. A source runs at most
///    one test while another source waits: its second gives way too.
///
/// What that bounds (defaults: max_clients 2, max_duration 10 s, max_streams 16). The longest
/// a test can hold a slot without completing is 19.6 s (parameters 2 s, 16 streams 3.6 s, a
/// 10 s test at the data floor, TEST_END 2 s late, results 2 s); 7.6 s without sending data.
///  - One source denies a legitimate client nothing: whatever it runs, one slot is free for the
///    other source or is handed to it at once (its second test gives way). With max_clients 1:
///    at most 19.6 s an hour (its first failing test; from then on its tests give way at once,
///    for an hour after each failure).
///  - 32 sources (127.x, or 32 Pods): a client is refused only while both slots are held by
///    sources that have not failed within the hour, each of which can fail at most once an
///    hour: at most 32 x 19.6 s / 2 slots = 314 s an hour (8.7 %), 122 s without data. Sources
///    that complete real tests (every step in time, data above the floor) are load, not a
///    stall: they are served in turn with everyone else. The penalties of at most 4096 sources
///    are remembered; beyond that the one idle longest is forgotten.
///
/// Threading: its own io_context on its own thread. Receiving a burst moves gigabytes per
/// second; on the responder loop that would delay the UDP echo replies peers time RTT with (and
/// /metrics scrapes), on the probe loop it would disturb our own probes' timing.
///
/// Series (responder_metrics.h): podnet_responder_requests_total{responder="burst",
/// result="completed" | "access_denied" | "refused" | "failed" | "no_cookie"}; of those not
/// served, podnet_responder_dropped_total{responder="burst", reason=} "not_probe_pod" (a source
/// AdmitSources did not list; refused), "busy" (no slot within the
/// 3 s wait, or this source already runs or waits for a test, or a full line; result
/// access_denied), "penalty" (no slot free and a test of this source failed within the hour;
/// access_denied), "unsupported" (UDP/SCTP/reverse/bidirectional; access_denied), "too_long"
/// (IEDURATION; refused), "too_many_streams" (IENUMSTREAMS; refused), "malformed" (parameters or
/// results that do not decode, or bytes sent while waiting in line: failed; a first 37 bytes
/// that are no cookie: no_cookie), "timeout" (a step's deadline: failed; no cookie within 2 s:
/// no_cookie), "stalled" (less than 128 KiB in a 2 s data window; failed), "preempted" (gave its
/// slot to a waiting source; failed), "pending_limit" (closed before its cookie to make room:
/// no_cookie). A client that breaks off mid-test is result "failed" only. And
/// podnet_responder_burst_received_bytes_total.
class BurstResponder {
 public:
  /// Binds and starts serving. Throws boost::system::system_error when the address cannot be
  /// bound (a start-up error, reported by the caller).
  BurstResponder(const config::kinds::burst::BurstResponderOptions& options,
                 prometheus::Registry& registry);
  ~BurstResponder();  // stops the thread; open tests are closed

  /// Thread-safe (posted to the responder's thread): the addresses admitted from now on
  /// (IPv4-mapped IPv6 ones as IPv4), replacing the last list. Tests already running go on.
  /// Ignored with `clients: any`.
  void AdmitSources(std::vector<boost::asio::ip::address> sources);

  std::uint16_t port() const;
  /// Tests in progress (for tests).
  int active_tests() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace podnet::responders
