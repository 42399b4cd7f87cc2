#pragma once

// BurstResponder::Impl: the burst responder's listener, its admission (cookies, slots, the
// waiting line, strangers), its counters, and each step's deadline. One test's protocol steps
// are burst_test.h's. Internal to the responders module: included by burst_server.cc only.

#include <prometheus/counter.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <chrono>
#include <list>
#include <map>
#include <set>
#include <thread>

#include "exporter/log/last_chance.h"
#include "exporter/net/address.h"
#include "exporter/net/tcp_info.h"
#include "exporter/responders/burst_admission.h"
#include "exporter/responders/burst_server.h"
#include "exporter/responders/responder_metrics.h"
#include "exporter/wire/iperf3.h"

namespace podnet::responders {

namespace iperf3 = wire::iperf3;

class BurstResponder::Impl {
  using tcp = boost::asio::ip::tcp;
  using ErrorCode = boost::system::error_code;
  using Clock = std::chrono::steady_clock;

  // Every step's deadline, from what a real client needs: stock iperf3 3.12 and our own client
  // (podnet-burst), measured on loopback by bench/iperf3_step_times.py (bench/README.md has the
  // figures), and a wide margin for a slow cross-zone path: each step is one round trip for the
  // client (the state byte there, its answer back), so a 100 ms RTT (~200x the reference's
  // cross-zone 0.5 ms) leaves each of these at least 10x what it needs.
  // Cookie: written right after connect (measured <= 20 ms).
  static constexpr auto kCookieTimeout = std::chrono::seconds(2);
  // PARAM_EXCHANGE -> the parameters (measured <= 27 ms under load).
  static constexpr auto kParamsTimeout = std::chrono::seconds(2);
  // CREATE_STREAMS -> every stream's cookie: the client connects its streams one after another,
  // one round trip each (measured <= 70 ms for 16 streams), so 2 s plus 100 ms per stream.
  static constexpr auto kStreamsTimeout = std::chrono::seconds(2);
  static constexpr auto kStreamTime = std::chrono::milliseconds(100);
  // The data phase: a client sends continuously from TEST_RUNNING on (first byte <= 21 ms, and
  // hundreds of MB in any 2 s on loopback). Every kDataWindow it must have brought at least one
  // iperf3 block (128 KiB, 512 kbit/s): a slow path's slow start passes that within its first
  // few round trips; a source that trickles is cut as stalled after kDataWindow, not after the
  // test's duration. (A test paced below ~0.5 Mbit/s with -b counts as stalled.)
  static constexpr auto kDataWindow = std::chrono::seconds(2);
  static constexpr std::uint64_t kMinWindowBytes = iperf3::kDefaultBlockSize;
  // time + omit -> TEST_END (measured <= 200 ms late).
  static constexpr auto kEndGrace = std::chrono::seconds(2);
  // EXCHANGE_RESULTS -> the client's results, then IPERF_DONE (measured <= 52 and 12 ms).
  static constexpr auto kResultsTimeout = std::chrono::seconds(2);
  // A client that finds every slot taken waits this long for one before ACCESS_DENIED (stock
  // iperf3 waits for PARAM_EXCHANGE as long as it takes; our probe's step timeout is 5 s by
  // default, so it hears the refusal rather than timing out).
  static constexpr auto kMaxWait = std::chrono::seconds(3);
  // Connections that have not sent their cookie yet. A stock client sends it right after
  // connecting, so the wait is short, one source holds few of them, and at either limit a
  // waiting connection makes room for the new one: the oldest of the source itself, at the
  // overall limit the oldest of the source with the most waiting. Stalled clients cannot lock
  // out a real one (the break test: 64 stalled connections refused every `iperf3 -c` for 5 s at a
  // time), nor can many sources crowd out one that has a single connection waiting.
  static constexpr std::size_t kMaxPending = 64;
  static constexpr std::size_t kMaxPendingPerSource =
      16;  // a client opening 16 streams at once keeps them
  static constexpr std::size_t kReadSize = 256 * 1024;  // per recv(MSG_TRUNC): nothing is copied

 public:
  Impl(const config::kinds::burst::BurstResponderOptions& options, prometheus::Registry& registry)
      : options_(options), acceptor_(io_), admission_(Limits(options)) {
    tcp::endpoint ep(options.listen_address.address, options.listen_address.port);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    if (ep.address().is_v6()) acceptor_.set_option(boost::asio::ip::v6_only(false));
    acceptor_.bind(ep);
    acceptor_.listen();
    auto& family = ResponderRequests(registry);
    completed_ = &family.Add({{"responder", "burst"}, {"result", "completed"}});
    failed_ = &family.Add({{"responder", "burst"}, {"result", "failed"}});
    // Refusals: the iperf3 answer as the result, why as the reason.
    busy_ = ResponderDrop(registry, "burst", "access_denied", "busy");
    penalty_ = ResponderDrop(registry, "burst", "access_denied", "penalty");
    unsupported_ = ResponderDrop(registry, "burst", "access_denied", "unsupported");
    too_long_ = ResponderDrop(registry, "burst", "refused", "too_long");
    too_many_streams_ = ResponderDrop(registry, "burst", "refused", "too_many_streams");
    malformed_ = ResponderDrop(registry, "burst", "failed", "malformed");
    timeout_ = ResponderDrop(registry, "burst", "failed", "timeout");
    stalled_ = ResponderDrop(registry, "burst", "failed", "stalled");
    preempted_ = ResponderDrop(registry, "burst", "failed", "preempted");
    pending_limit_ = ResponderDrop(registry, "burst", "no_cookie", "pending_limit");
    cookie_timeout_ = ResponderDrop(registry, "burst", "no_cookie", "timeout");
    bad_cookie_ = ResponderDrop(registry, "burst", "no_cookie", "malformed");
    stranger_ = ResponderDrop(registry, "burst", "refused", "not_probe_pod");
    received_ = &prometheus::BuildCounter()
                     .Name("podnet_responder_burst_received_bytes_total")
                     .Help("Payload bytes the burst responder received from testing clients.")
                     .Register(registry)
                     .Add({});
  }

  void Start() {
    Accept();
    thread_ = std::thread([this] { log::RunOrExit("burst responder", [this] { io_.run(); }); });
  }

  void Stop();

  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int active() const { return active_.load(); }

  void AdmitSources(std::vector<boost::asio::ip::address> sources) {
    boost::asio::post(io_, [this, sources = std::move(sources)] {
      admitted_.clear();
      for (const auto& a : sources) admitted_.insert(net::Unmapped(a));
    });
  }

 private:
  class Test;
  using Address = boost::asio::ip::address;
  using Outcome = BurstAdmission::Outcome;

  static BurstAdmissionLimits Limits(const config::kinds::burst::BurstResponderOptions& options) {
    BurstAdmissionLimits l;
    l.slots = options.max_clients;
    l.cooldown = std::chrono::duration_cast<std::chrono::seconds>(kMaxWait);
    return l;
  }

  void Accept() {
    acceptor_.async_accept([this](ErrorCode ec, tcp::socket socket) {
      if (ec == boost::asio::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec && Admitted(socket)) ReadCookie(std::move(socket));
      Accept();
    });
  }

  // Whether `socket`'s source may test (options_.any_client, or an address AdmitSources
  // listed). A stranger is closed at once, before it holds anything, and counted.
  bool Admitted(tcp::socket& socket) {
    if (options_.any_client) return true;
    ErrorCode ec;
    auto source = socket.remote_endpoint(ec).address();
    if (!ec && admitted_.contains(net::Unmapped(source))) return true;
    stranger_.Count();  // first: a client that sees the close may look at the counter
    socket.close(ec);
    return false;
  }

  // Every connection starts with a cookie: a new test's control connection, or a data stream
  // of a test waiting for its streams.
  struct Pending {
    Pending(tcp::socket s, boost::asio::io_context& io) : socket(std::move(s)), timer(io) {}
    tcp::socket socket;
    boost::asio::steady_timer timer;
    std::string cookie = std::string(iperf3::kCookieSize, '\0');
    Address source;
  };

  // The pending connection to close for a new one from `source`: its own oldest at the
  // per-source limit; at the overall limit the oldest of the source with the most waiting.
  std::shared_ptr<Pending> PendingVictim(const Address& source) {
    std::map<Address, std::size_t> per_source;
    for (const auto& p : pending_) ++per_source[p->source];
    Address from = source;
    if (per_source[source] < kMaxPendingPerSource) {
      if (pending_.size() < kMaxPending) return nullptr;
      from = std::max_element(per_source.begin(), per_source.end(), [](auto& a, auto& b) {
               return a.second < b.second;
             })->first;
    }
    return *std::find_if(pending_.begin(), pending_.end(),
                         [&](const auto& p) { return p->source == from; });
  }

  void ReadCookie(tcp::socket socket) {
    ErrorCode ignored;
    auto source = net::Unmapped(socket.remote_endpoint(ignored).address());
    if (auto victim = PendingVictim(source)) Evict(victim, pending_limit_);
    auto p = std::make_shared<Pending>(std::move(socket), io_);
    p->source = source;
    pending_.push_back(p);
    p->timer.expires_after(kCookieTimeout);
    p->timer.async_wait([this, p](ErrorCode ec) {
      if (!ec) Evict(p, cookie_timeout_);
    });
    boost::asio::async_read(
        p->socket, boost::asio::buffer(p->cookie), [this, p](ErrorCode ec, std::size_t) {
          p->timer.cancel();
          // Gone already when evicted (counted there) or closed by the
          // client before its cookie (not a request).
          if (std::find(pending_.begin(), pending_.end(), p) == pending_.end()) {
            return;
          }
          pending_.remove(p);
          if (ec) return;
          if (!iperf3::IsCookie(p->cookie)) {
            bad_cookie_.Count();
            return;
          }
          Dispatch(std::move(p->socket), p->cookie, p->source);
        });
  }

  // Closes a connection still waiting for its cookie (its read then completes with an error),
  // counting `why`.
  void Evict(std::shared_ptr<Pending> p, const ResponderDrop& why) {
    if (std::find(pending_.begin(), pending_.end(), p) == pending_.end()) return;  // done
    ErrorCode ignored;
    p->socket.close(ignored);
    p->timer.cancel();
    pending_.remove(p);
    why.Count();
  }

  // A control connection waiting for a slot (BurstAdmission said kWait): one per source.
  struct Waiting {
    Waiting(tcp::socket s, boost::asio::io_context& io) : socket(std::move(s)), timer(io) {}
    tcp::socket socket;
    boost::asio::steady_timer timer;
    std::string cookie;
    Address source;
  };

  void Dispatch(tcp::socket socket, const std::string& cookie, const Address& source);
  void StartTest(tcp::socket socket, const std::string& cookie, const Address& source);
  void Wait(tcp::socket socket, const std::string& cookie, const Address& source);
  void WatchWaiting(const std::shared_ptr<Waiting>& w);
  // Takes `source`'s waiting connection out of the line (nullptr when it has none).
  std::shared_ptr<Waiting> TakeWaiting(const Address& source);
  // One ACCESS_DENIED byte, then close (as iperf3 -s does when busy). Counted first: asio may
  // send the byte inside async_write, and a client that reads it may look at the counter.
  void Deny(tcp::socket socket, const ResponderDrop& why);
  // Hands free slots to waiting sources and makes tests give way to them (BurstAdmission's
  // Promote and Victim), until neither has anything to do.
  void Rebalance();
  void Remove(Test* t, Outcome outcome);

  boost::asio::io_context io_;
  config::kinds::burst::BurstResponderOptions options_;
  tcp::acceptor acceptor_;
  std::thread thread_;
  BurstAdmission admission_;
  std::list<std::shared_ptr<Test>> tests_;       // oldest first
  std::list<std::shared_ptr<Pending>> pending_;  // oldest first
  std::map<Address, std::shared_ptr<Waiting>> waiting_;
  std::set<Address> admitted_;  // AdmitSources: the probe Pods' and static peers' addresses
  bool rebalancing_ = false;
  std::atomic<int> active_{0};
  prometheus::Counter* completed_;
  prometheus::Counter* failed_;  // the client broke off or misbehaved mid-test
  ResponderDrop busy_;         // no slot within kMaxWait; this source already has one; a full line
  ResponderDrop penalty_;      // no slot free, and a test of this source failed within the hour
  ResponderDrop unsupported_;  // UDP, SCTP, reverse or bidirectional
  ResponderDrop too_long_;     // over max_duration, or unbounded (-n/-k)
  ResponderDrop too_many_streams_;
  ResponderDrop malformed_;       // parameters or results that do not decode
  ResponderDrop timeout_;         // a step's deadline passed
  ResponderDrop stalled_;         // the data phase brought less than kMinWindowBytes in a window
  ResponderDrop preempted_;       // gave its slot to a waiting source (BurstAdmission::Victim)
  ResponderDrop pending_limit_;   // closed before its cookie to make room (per source or in all)
  ResponderDrop stranger_;        // a source that is no probe Pod (options_.any_client off)
  ResponderDrop cookie_timeout_;  // no cookie within kCookieTimeout
  ResponderDrop bad_cookie_;      // the first 37 bytes were not a cookie
  prometheus::Counter* received_;
};

}  // namespace podnet::responders
