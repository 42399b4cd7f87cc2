#pragma once

#include <prometheus/registry.h>

#include <memory>

#include "exporter/config/probe_options.h"

namespace podnet::responders {

/// The iperf3-compatible TCP server (responders.burst, default port 5201) that peers' burst
/// probes — and a stock `iperf3 -c` — test against. TCP, forward direction only (the client
/// sends); a test asking for UDP/SCTP, reverse or bidirectional mode gets ACCESS_DENIED, one
/// longer than max_duration (or unbounded: -n/-k) SERVER_ERROR IEDURATION, more than
/// max_streams SERVER_ERROR IENUMSTREAMS, and a client beyond max_clients concurrent tests
/// ACCESS_DENIED (what iperf3 -s answers when busy). Every step has a deadline (5 s; the data
/// phase time + omit + 5 s), so a client that stalls or dies mid-test frees its slot. Before
/// its cookie, a connection gets 2 s; at most 16 wait per source address and 64 in all, and at
/// either limit the oldest waiting one is closed for the new one, so stalled connections cannot
/// lock out a real client (which sends its cookie at once).
///
/// Threading: its own io_context on its own thread. Receiving a burst moves gigabytes per
/// second; on the responder loop that would delay the UDP echo replies peers time RTT with (and
/// /metrics scrapes), on the probe loop it would disturb our own probes' timing.
///
/// Series (responder_metrics.h): podnet_responder_requests_total{responder="burst",
/// result="completed" | "access_denied" | "refused" | "failed" | "no_cookie"}; of those not
/// served, podnet_responder_dropped_total{responder="burst", reason=} "busy" (max_clients; result
/// access_denied), "unsupported" (UDP/SCTP/reverse/bidirectional; access_denied), "too_long"
/// (IEDURATION; refused), "too_many_streams" (IENUMSTREAMS; refused), "malformed" (parameters or
/// results that do not decode: failed; a first 37 bytes that are no cookie: no_cookie),
/// "timeout" (a step's deadline: failed; no cookie within 2 s: no_cookie), "pending_limit"
/// (closed before its cookie to make room: no_cookie). A client that breaks off mid-test is
/// result "failed" only. And podnet_responder_burst_received_bytes_total.
class BurstResponder {
 public:
  /// Binds and starts serving. Throws boost::system::system_error when the address cannot be
  /// bound (a start-up error, reported by the caller).
  BurstResponder(const probes::burst::BurstResponderOptions& options,
                 prometheus::Registry& registry);
  ~BurstResponder();  // stops the thread; open tests are closed

  std::uint16_t port() const;
  /// Tests in progress (for tests).
  int active_tests() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace podnet::responders
