#pragma once

#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace podnet::responders {

/// Limits of ConnectionSlots. The defaults are the gRPC health responder's (grpc_health.h says
/// why each is what it is).
struct SlotLimits {
  int max_connections = 256;           // all sources together
  int max_connections_per_source = 8;  // one source address (IPv4-mapped IPv6 = IPv4)
  /// A connection that received no byte for this long is closed.
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(2)};
  /// After one of its connections was evicted or timed out, a source may take a slot from
  /// another source only while under its fair share (max_connections / sources holding slots).
  std::chrono::milliseconds cooldown{std::chrono::seconds(10)};
  /// Input budget of one source, all its connections together: a token bucket of the bytes
  /// they received, `input_burst_bytes` at once, refilled at `input_bytes_per_second` and by
  /// `input_credit_per_answer` for every request answered. So what a source may have sent and
  /// not had answered is bounded (a stream reset before its answer is never paid back), while
  /// a client that waits for its answers may ask as often as it likes.
  double input_burst_bytes = 1024;
  double input_bytes_per_second = 512;
  double input_credit_per_answer = 256;
  /// Credits may raise the budget this far above input_burst_bytes (time never does). The guard
  /// charges a request's bytes when it reads the kernel's count, which may be after gRPC has
  /// answered it: a credit capped at a full budget then was lost, and a client calling back to
  /// back from a fresh exporter was cut after 11-16 calls of 150 bytes (8 runs in 60). 2 KiB:
  /// 8 answers ahead, so a client waiting for its answers is never cut; an attacker who earns
  /// it with real calls gets 73 more reset streams of 28 bytes at once.
  double input_credit_headroom_bytes = 2048;
  /// Source records kept at once. Those holding slots always are; beyond, the others are
  /// forgotten, first those with nothing to remember (a full budget, no cooldown).
  std::size_t max_sources = 4096;
};

/// Who may hold one of a TCP responder's connection slots: bookkeeping only, no I/O, one thread
/// (the caller's lock), time passed in so that tests are deterministic. The caller names each
/// connection by an Id of its own (e.g. the socket's SO_COOKIE), tells what it receives, and
/// closes the connections the answers name.
///
/// The rules, so that no number of idle or flooding holders locks a legitimate peer out:
///  - a source holds at most max_connections_per_source slots (kSourceConnectionLimit);
///  - when every slot is taken, a newcomer takes the slot of the source holding the most
///    connections (its connection idle the longest), as long as it would then hold no more than
///    that source had (max-min fairness; kEvicted). A source in its cooldown (one of its
///    connections was evicted or timed out within `cooldown`) may do so only while under its
///    fair share. Otherwise the newcomer is refused (kConnectionLimit);
///  - a source whose connections together received more than its input budget (less what was
///    answered) has all of them closed, and new ones refused until the budget is full again
///    (kInputBudget);
///  - a connection that received nothing for idle_timeout is closed (kIdleTimeout).
class ConnectionSlots {
 public:
  using Clock = std::chrono::steady_clock;
  using Time = Clock::time_point;
  using Id = std::uint64_t;
  using Address = boost::asio::ip::address;

  /// Why a connection is refused or closed; ReasonName is its label value.
  enum class Reason {
    kSourceConnectionLimit,  // refused: the source holds max_connections_per_source
    kConnectionLimit,        // refused: every slot taken, and the source may not evict
    kInputBudget,            // closed, or refused: the source sent more than its budget
    kEvicted,                // closed: its slot went to a source holding fewer
    kIdleTimeout,            // closed: nothing received for idle_timeout
  };
  static const char* ReasonName(Reason r);

  struct Admission {
    bool admitted = false;
    Reason refused = Reason::kConnectionLimit;  // when not admitted
    std::optional<Id> evicted;  // when admitted in its place: close it (already forgotten)
  };

  explicit ConnectionSlots(const SlotLimits& limits);

  /// Whether a new connection from `source` may take a slot at `now` (monotonic time, never
  /// decreasing between calls). When admitted, the caller calls Add (or nothing, if the
  /// connection is gone meanwhile).
  Admission Admit(const Address& source, Time now);
  /// Takes the slot Admit granted. `id` must be new.
  void Add(Id id, const Address& source, Time now);
  /// `bytes_received`: all the bytes `id` received so far (TCP_INFO tcpi_bytes_received). The
  /// connections to close because their source is over its input budget: all of that source's,
  /// `id` among them, already forgotten. Unknown ids are ignored.
  std::vector<Id> Received(Id id, std::uint64_t bytes_received, Time now);
  /// A request on `id` was answered: its source's budget gets input_credit_per_answer back (up
  /// to input_credit_headroom_bytes over full). Unknown ids are ignored.
  void Answered(Id id, Time now);
  /// The connections that received nothing for idle_timeout, already forgotten.
  std::vector<Id> Idle(Time now);
  /// Forgets a connection that ended (closed by its client or server, or closed by the caller
  /// for a reason of its own: then `cool_down` starts its source's cooldown as an eviction does).
  void Remove(Id id, Time now, bool cool_down = false);

  int connections() const { return static_cast<int>(connections_.size()); }
  int ConnectionsOf(const Address& source) const;
  std::size_t sources() const { return sources_.size(); }

 private:
  struct Connection {
    Address source;
    Time last_input;  // accepted, or the last time its byte count grew
    std::uint64_t bytes = 0;
  };
  struct Source {
    int connections = 0;
    double tokens;         // input budget left (bytes); negative after an overdraft
    Time refilled;         // when `tokens` was last brought up to date
    Time cooldown_until;   // evicted or timed out before this: no eviction over fair share
    bool blocked = false;  // over budget: refused until the bucket is full again
  };

  Source& SourceOf(const Address& source, Time now);
  void Refill(Source& s, Time now) const;
  void Forget(std::map<Id, Connection>::iterator it, Time now, bool cool_down);
  std::optional<Id> Victim(const Address& newcomer) const;
  void ForgetIdleSources(Time now);

  SlotLimits limits_;
  std::map<Id, Connection> connections_;
  std::map<Address, Source> sources_;
  int holding_ = 0;  // sources holding at least one slot
};

}  // namespace podnet::responders
