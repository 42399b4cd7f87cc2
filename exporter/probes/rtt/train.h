#pragma once

#include <cstdint>
#include <vector>

namespace podnet::probes::rtt {

/// What a train's round gave: counts and the RTT of every request answered in time.
struct TrainResult {
  int sent = 0;
  int received = 0;                 // first replies before Close (answered in time)
  int duplicates = 0;               // further replies to an already answered request
  int reordered = 0;                // first replies that came after a reply to a later request
  int late = 0;                     // first replies after Close (counted as lost, like ping -W)
  std::vector<double> rtt_seconds;  // one per received reply, in request order
  int tx_kernel_stamped = 0;        // of rtt_seconds, how many were timed from a kernel TX stamp
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
  /// (a wall-clock step) are dropped from rtt_seconds but still count as received. The result
  /// stays valid until the next Reset.
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
};

}  // namespace podnet::probes::rtt
