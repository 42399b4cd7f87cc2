#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace podnet::probes::rtt {

/// The exact minimum and median of one round's RTTs (seconds, at the nanosecond resolution of
/// the stamps they came from): what podnet_rtt_round_{min,median}_seconds export.
struct RoundStats {
  double min_seconds = 0;
  /// Of an even count, the mean of the two middle values (as numpy.median and PromQL's
  /// quantile(0.5) define it): unbiased when the noise is symmetric, where the lower median
  /// would sit half a gap low in every round of the default even count (20).
  double median_seconds = 0;
};

/// RoundStats of `rtt_seconds` (any order); std::nullopt when it is empty (a round without an
/// answer has no minimum or median, not a zero). `scratch` is overwritten with a copy of the
/// input (partly sorted); keeping it across rounds avoids an allocation per round.
std::optional<RoundStats> Summarize(std::span<const double> rtt_seconds,
                                    std::vector<double>& scratch);

/// What a train's round gave: counts and the RTT of every request answered in time.
struct TrainResult {
  int sent = 0;
  int received = 0;                 // first replies before Close (answered in time)
  int duplicates = 0;               // further replies to an already answered request
  int reordered = 0;                // first replies that came after a reply to a later request
  int late = 0;                     // first replies after Close (counted as lost, like ping -W)
  std::vector<double> rtt_seconds;  // one per received reply, in request order
  int tx_kernel_stamped = 0;        // of rtt_seconds, how many were timed from a kernel TX stamp
  std::optional<RoundStats> stats;  // Summarize(rtt_seconds): nullopt when rtt_seconds is empty
};

/// The bookkeeping of one packet train: `count` echo requests, indexed 0..count-1. Times are
/// CLOCK_REALTIME nanoseconds, the clock of SO_TIMESTAMPING software stamps. Pure: no I/O.
class Train {
 public:
  explicit Train(int count);

  /// Starts over for a new round of `count` requests, keeping the memory of the last one (no
  /// allocation per round once the sizes have been seen).
  void Reset(int count);

  /// Request `index` was handed to the kernel at `tx_user_ns` (read just before sendmsg).
  void OnSent(int index, std::int64_t tx_user_ns);

  /// The kernel's software TX timestamp of request `index` (SOF_TIMESTAMPING_TX_SOFTWARE). Used
  /// instead of the user-space time when plausible (after it, within 1 s). Only the first stamp
  /// counts: on a bridged path the bridge port stamps the same packet again, later.
  void OnTxTimestamp(int index, std::int64_t tx_kernel_ns);

  enum class Reply { kFirst, kReordered, kDuplicate, kLate, kNotSent };

  /// A reply to request `index` arrived at `rx_ns` (kernel RX stamp, or user time without one).
  Reply OnReply(int index, std::int64_t rx_ns);

  /// Ends the round: requests not answered by now are lost; later replies are kLate. Computes
  /// each RTT as rx − tx (kernel TX stamp when present). Replies that would give a negative RTT
  /// (a wall-clock step) are dropped from rtt_seconds but still count as received; `stats`
  /// summarizes rtt_seconds (late replies, after Close, are in neither). The result stays valid
  /// until the next Reset.
  const TrainResult& Close();

  bool closed() const { return closed_; }
  /// Every request was sent and answered in time: nothing is left to wait for (a later reply can
  /// only be a duplicate, which OnReply still counts after Close).
  bool complete() const { return result_.received == count(); }
  int count() const { return static_cast<int>(slots_.size()); }

 private:
  struct Slot {
    std::int64_t tx_user_ns = 0;
    std::int64_t tx_kernel_ns = 0;
    std::int64_t rx_ns = 0;
    bool sent = false;
    bool answered = false;  // a reply came, in time or late
    bool in_time = false;
  };
  std::vector<Slot> slots_;
  int highest_answered_ = -1;
  bool closed_ = false;
  TrainResult result_;
  std::vector<double> scratch_;  // Summarize's, kept across rounds
};

}  // namespace podnet::probes::rtt
