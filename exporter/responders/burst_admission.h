#pragma once

#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>

namespace podnet::responders {

/// How the burst responder shares its test slots between source addresses (burst_server.h says
/// why each number is what it is).
struct BurstAdmissionLimits {
  int slots = 2;  // responders.burst.max_clients: tests at once
  /// Sources waiting for a slot at once, one connection each.
  std::size_t max_waiting = 16;
  /// For this long after a test of it ended, a source waits behind every waiting source that
  /// has not just tested.
  std::chrono::seconds cooldown{3};
  /// For this long after a test of it failed (renewed by every failure), a source is refused
  /// when no slot is free, and a test it runs gives way to any source that waits.
  std::chrono::seconds penalty{3600};
  /// For this long after a test of it completed (and no failure since), a source is known:
  /// known sources wait ahead of unknown ones.
  std::chrono::seconds memory{3600};
  /// Sources remembered at once (must exceed slots + max_waiting); beyond it the one idle the
  /// longest is forgotten, penalty and all.
  std::size_t max_sources = 4096;
};

/// The burst responder's fair share of its test slots, per source address: who gets a slot,
/// who waits, who is refused, and whose running test gives way. It knows sources, not
/// connections: the caller (BurstResponder) keeps one waiting connection per waiting source and
/// the tests, reports each test's end with its outcome, and after every change calls Promote()
/// and then Victim() until both have nothing to say. Not thread-safe (one per responder, used
/// on its thread). Time is passed in (monotonic, non-decreasing), so tests are deterministic.
///
/// The rules:
///  - a free slot goes to the asker when nobody waits (a penalized source included: nobody
///    else wants it), else to the best-ranked waiting source (Promote);
///  - with no slot free: a penalized source is refused (kPenalty); a source that already runs
///    or waits for a test is refused (kBusy): a second slot is for others; any other source
///    waits (kWait), while fewer than max_waiting do, or in place of the worst-ranked waiting
///    one when it ranks better (that one is refused), else it is refused (kBusy);
///  - rank among waiting sources: not cooling before cooling (a test ended within cooldown),
///    then known before unknown, then the longest waiting;
///  - while a source waits, a running test gives way (Victim) when its source is penalized, or
///    when its source runs another test too (one source holds at most one slot when another
///    wants one).
class BurstAdmission {
 public:
  using Clock = std::chrono::steady_clock;
  using Address = boost::asio::ip::address;

  enum class Verdict {
    kAdmit,    // take a slot now
    kWait,     // wait for one (the caller bounds the wait and calls Withdraw at its end)
    kBusy,     // refused: no slot, and this source already has one or the queue is full
    kPenalty,  // refused: no slot, and a test of this source failed within `penalty`
  };
  enum class Outcome {
    kCompleted,  // the whole exchange, results included: the source is known
    kFailed,     // anything else the client caused: a step's deadline, the data phase below its
                 // floor, a client that broke off or sent nonsense: the source's penalty
    kRefused,    // refused at its parameters, or preempted (Victim): tells nothing
  };
  struct Decision {
    Verdict verdict;
    /// With kWait: the waiting source that lost its place to this one (the queue was full).
    /// It no longer waits; the caller refuses its connection as busy.
    std::optional<Address> bumped;
  };

  explicit BurstAdmission(const BurstAdmissionLimits& limits);

  /// A new test from `source` asks for a slot.
  Decision Ask(const Address& source, Clock::time_point now);
  /// A waiting source stops waiting (its wait ran out, or its connection closed).
  void Withdraw(const Address& source);
  /// A test of `source` ended and gave its slot back.
  void Release(const Address& source, Outcome outcome, Clock::time_point now);
  /// The waiting source that takes a free slot now (it holds it from here on), if any.
  std::optional<Address> Promote(Clock::time_point now);
  /// A source one of whose running tests must give way to a waiting source, if any: a
  /// penalized source first, else one running two tests or more. The caller ends that
  /// source's youngest test (Release) and calls Promote.
  std::optional<Address> Victim(Clock::time_point now) const;

  int held() const { return held_; }
  std::size_t waiting() const { return waiting_; }
  /// Sources remembered (bounded by max_sources).
  std::size_t sources() const { return sources_.size(); }
  bool penalized(const Address& source, Clock::time_point now) const;

 private:
  struct Source {
    int held = 0;
    bool waiting = false;
    Clock::time_point waiting_since{};
    std::optional<Clock::time_point> last_end;   // the last test's end
    std::optional<Clock::time_point> completed;  // the last completed test, unless failed since
    std::optional<Clock::time_point> penalty_until;
    Clock::time_point last_seen{};
  };
  // Rank key: smaller waits ahead.
  struct Rank {
    bool cooling;
    bool unknown;
    Clock::time_point since;
    bool operator<(const Rank& o) const {
      if (cooling != o.cooling) return !cooling;
      if (unknown != o.unknown) return !unknown;
      return since < o.since;
    }
  };
  Rank RankOf(const Source& s, Clock::time_point now) const;
  bool Penalized(const Source& s, Clock::time_point now) const;
  Source& Entry(const Address& source, Clock::time_point now);
  void MakeRoom(Clock::time_point now);

  BurstAdmissionLimits limits_;
  std::map<Address, Source> sources_;
  int held_ = 0;
  std::size_t waiting_ = 0;
};

}  // namespace podnet::responders
