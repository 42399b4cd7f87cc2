#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "exporter/config/units.h"

namespace podnet::probes::burst {

/// One burst to ask of an iperf3-compatible server (ours or a stock `iperf3 -s`).
struct BurstRequest {
  boost::asio::ip::tcp::endpoint server;
  int streams = 1;                                          // parallel TCP connections
  config::Duration duration = std::chrono::seconds(2);      // data phase
  config::Duration step_timeout = std::chrono::seconds(5);  // every step outside the data phase
  config::Duration sample_interval = std::chrono::milliseconds(100);
  /// Stop sending once this many payload bytes are written (what is left of the byte budget):
  /// the burst then ends early and its throughput is over the time it did run.
  std::uint64_t max_bytes = std::numeric_limits<std::uint64_t>::max();
  std::size_t block_size = 128 * 1024;  // bytes per write, as iperf3's default
};

/// One interval of a burst (all streams together), from the sender's view.
struct IntervalSample {
  double start_seconds = 0;  // since the data phase began
  double end_seconds = 0;
  std::uint64_t bytes = 0;           // payload written in the interval
  std::uint32_t retransmits = 0;     // Δ tcpi_total_retrans, all streams
  double rtt_seconds = 0;            // mean of the streams' smoothed tcpi_rtt at the interval end
  std::uint64_t snd_cwnd_bytes = 0;  // Σ streams' tcpi_snd_cwnd × tcpi_snd_mss
};

/// One stream's totals.
struct StreamSummary {
  std::uint64_t bytes_sent = 0;          // payload written
  std::uint64_t bytes_received = 0;      // payload the server read (from its results)
  std::uint32_t retransmits = 0;         // Δ tcpi_total_retrans over the burst
  double rtt_seconds = 0;                // smoothed tcpi_rtt at the end
  std::uint64_t max_snd_cwnd_bytes = 0;  // max tcpi_snd_cwnd × tcpi_snd_mss seen
  std::uint32_t pmtu = 0;
};

/// What one burst measured. `error` is empty on success, else the reason label
/// (connect | access_denied | server_error | protocol | timeout | connection_lost | cancelled).
struct BurstResult {
  std::string error;
  std::string detail;                      // human-readable, for logs
  double seconds = 0;                      // data phase length (shorter when the budget cut it)
  bool budget_cut = false;                 // stopped early at max_bytes
  std::uint64_t bytes_sent = 0;            // payload written, all streams
  std::uint64_t bytes_received = 0;        // payload the receiver read (its results document)
  double throughput_bytes_per_second = 0;  // bytes_received / seconds (goodput)
  std::uint32_t retransmits = 0;
  double rtt_seconds = 0;            // mean over streams and interval samples of tcpi_rtt
  std::uint64_t snd_cwnd_bytes = 0;  // Σ over streams of their max cwnd
  std::uint32_t pmtu = 0;
  double cpu_seconds = 0;  // sender thread CPU over the data phase
  double cpu_user_seconds = 0;
  double cpu_system_seconds = 0;
  /// Bytes on the wire, IP and TCP headers and the control connection included (what a cloud
  /// bills): from tcpi_bytes_sent/received and segment counts. Set on failures too.
  std::uint64_t wire_bytes_sent = 0;
  std::uint64_t wire_bytes_received = 0;
  std::vector<IntervalSample> intervals;
  std::vector<StreamSummary> streams;
  int server_sender_has_retransmits = 0;
};

/// The client side of one iperf3 TCP test (forward direction: we send), on an io_context.
/// Every step has a deadline; the result callback runs exactly once, on the io_context, after
/// every socket of the burst is closed. Never throws on the network path.
class BurstClient {
 public:
  using Done = std::function<void(const BurstResult&)>;
  /// Starts a burst. Keep the returned handle to Cancel it; dropping it does not stop the burst.
  static std::shared_ptr<BurstClient> Start(boost::asio::io_context& io, BurstRequest request,
                                            Done done);
  virtual ~BurstClient() = default;
  /// Ends the burst now (result error "cancelled"). Call on the io_context's thread.
  virtual void Cancel() = 0;
};

}  // namespace podnet::probes::burst
