#include "exporter/responders/burst_server.h"

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
#include "exporter/proto/iperf3.h"
#include "exporter/responders/burst_admission.h"
#include "exporter/responders/responder_metrics.h"

namespace podnet::responders {
namespace {

using boost::asio::ip::tcp;
using ErrorCode = boost::system::error_code;
using Clock = std::chrono::steady_clock;
namespace iperf3 = proto::iperf3;

// Every step's deadline, from what a real client needs: stock iperf3 3.12 and our own client
// (podnet-burst), measured on loopback by bench/iperf3_step_times.py (bench/README.md has the
// figures), and a wide margin for a slow cross-zone path: each step is one round trip for the
// client (the state byte there, its answer back), so a 100 ms RTT (~200x the reference's
// cross-zone 0.5 ms) leaves each of these at least 10x what it needs.
// Cookie: written right after connect (measured <= 20 ms).
constexpr auto kCookieTimeout = std::chrono::seconds(2);
// PARAM_EXCHANGE -> the parameters (measured <= 27 ms under load).
constexpr auto kParamsTimeout = std::chrono::seconds(2);
// CREATE_STREAMS -> every stream's cookie: the client connects its streams one after another,
// one round trip each (measured <= 70 ms for 16 streams), so 2 s plus 100 ms per stream.
constexpr auto kStreamsTimeout = std::chrono::seconds(2);
constexpr auto kStreamTime = std::chrono::milliseconds(100);
// The data phase: a client sends continuously from TEST_RUNNING on (first byte <= 21 ms, and
// hundreds of MB in any 2 s on loopback). Every kDataWindow it must have brought at least one
// iperf3 block (128 KiB, 512 kbit/s): a slow path's slow start passes that within its first
// few round trips; a source that trickles is cut as stalled after kDataWindow, not after the
// test's duration. (A test paced below ~0.5 Mbit/s with -b counts as stalled.)
constexpr auto kDataWindow = std::chrono::seconds(2);
constexpr std::uint64_t kMinWindowBytes = iperf3::kDefaultBlockSize;
// time + omit -> TEST_END (measured <= 200 ms late).
constexpr auto kEndGrace = std::chrono::seconds(2);
// EXCHANGE_RESULTS -> the client's results, then IPERF_DONE (measured <= 52 and 12 ms).
constexpr auto kResultsTimeout = std::chrono::seconds(2);
// A client that finds every slot taken waits this long for one before ACCESS_DENIED (stock
// iperf3 waits for PARAM_EXCHANGE as long as it takes; our probe's step timeout is 5 s by
// default, so it hears the refusal rather than timing out).
constexpr auto kMaxWait = std::chrono::seconds(3);
// Connections that have not sent their cookie yet. A stock client sends it right after
// connecting, so the wait is short, one source holds few of them, and at either limit a
// waiting connection makes room for the new one: the oldest of the source itself, at the
// overall limit the oldest of the source with the most waiting. Stalled clients cannot lock
// out a real one (the break test: 64 stalled connections refused every `iperf3 -c` for 5 s at a
// time), nor can many sources crowd out one that has a single connection waiting.
constexpr std::size_t kMaxPending = 64;
constexpr std::size_t kMaxPendingPerSource = 16;  // a client opening 16 streams at once keeps them
constexpr std::size_t kReadSize = 256 * 1024;     // per recv(MSG_TRUNC): nothing is copied

}  // namespace

class BurstResponder::Impl {
 public:
  Impl(const probes::burst::BurstResponderOptions& options, prometheus::Registry& registry)
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

  static BurstAdmissionLimits Limits(const probes::burst::BurstResponderOptions& options) {
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
  probes::burst::BurstResponderOptions options_;
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

// One test: the control connection, its streams, and the steps of the protocol.
class BurstResponder::Impl::Test : public std::enable_shared_from_this<Test> {
 public:
  Test(Impl* owner, tcp::socket control, std::string cookie, Address source)
      : owner_(owner),
        control_(std::move(control)),
        cookie_(std::move(cookie)),
        source_(std::move(source)),
        deadline_(owner_->io_),
        progress_(owner_->io_) {
    ErrorCode ignored;
    control_.set_option(tcp::no_delay(true), ignored);
    auto ep = control_.remote_endpoint(ignored);
    peer_ = ep.address().to_string();
  }

  const std::string& cookie() const { return cookie_; }
  const Address& source() const { return source_; }
  bool wants_streams() const { return wants_streams_; }

  void Begin() {
    Arm(kParamsTimeout, "parameters");
    WriteState(iperf3::kParamExchange, [self = shared_from_this()] { self->ReadParams(); });
  }

  void AddStream(tcp::socket s) {
    streams_.push_back(std::make_unique<Stream>(std::move(s)));
    if (static_cast<int>(streams_.size()) < params_.parallel) return;
    wants_streams_ = false;
    std::string two{static_cast<char>(iperf3::kTestStart), static_cast<char>(iperf3::kTestRunning)};
    Write(std::move(two), [self = shared_from_this()] { self->Run(); });
  }

  // Ends the test for a waiting source (BurstAdmission::Victim).
  void Preempt() {
    End(owner_->preempted_, "gave its slot to a waiting source", Outcome::kRefused);
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    ErrorCode ignored;
    deadline_.cancel();
    progress_.cancel();
    control_.close(ignored);
    for (auto& s : streams_) s->socket.close(ignored);
  }

 private:
  struct Stream {
    explicit Stream(tcp::socket s) : socket(std::move(s)), buffer(kReadSize) {}
    tcp::socket socket;
    std::vector<char> buffer;
    std::uint64_t bytes = 0;
  };

  // A step's deadline: passing it is a failure (the source's penalty, BurstAdmission).
  void Arm(Clock::duration after, const char* what) {
    deadline_.expires_after(after);
    deadline_.async_wait([weak = weak_from_this(), what](ErrorCode ec) {
      auto self = weak.lock();
      if (ec || !self || self->closed_) return;
      self->End(self->owner_->timeout_, std::string("deadline passed waiting for ") + what,
                Outcome::kFailed);
    });
  }

  void Write(std::string bytes, std::function<void()> next) {
    auto buf = std::make_shared<std::string>(std::move(bytes));
    boost::asio::async_write(
        control_, boost::asio::buffer(*buf),
        [self = shared_from_this(), buf, next = std::move(next)](ErrorCode ec, std::size_t) {
          if (self->closed_) return;
          if (ec) return self->End(self->owner_->failed_, "control write: " + ec.message());
          next();
        });
  }
  void WriteState(std::int8_t s, std::function<void()> next) {
    Write(std::string(1, static_cast<char>(s)), std::move(next));
  }

  // Refusals: SERVER_ERROR carries the reason for the client to print.
  // `reason` is one of owner_'s members.
  void Refuse(std::int32_t i_errno, const ResponderDrop& reason, const std::string& why) {
    std::string msg(1, static_cast<char>(iperf3::kServerError));
    for (std::int32_t v : {i_errno, std::int32_t{0}}) {
      auto u = static_cast<std::uint32_t>(v);
      for (int shift : {24, 16, 8, 0}) msg.push_back(static_cast<char>(u >> shift));
    }
    Write(std::move(msg), [self = shared_from_this(), why, refusal = &reason] {
      self->End(*refusal, why, Outcome::kRefused);
    });
  }
  void Deny(const std::string& why) {
    WriteState(iperf3::kAccessDenied, [self = shared_from_this(), why] {
      self->End(self->owner_->unsupported_, why, Outcome::kRefused);
    });
  }

  void ReadJson(std::function<void(nlohmann::json)> next) {
    boost::asio::async_read(
        control_, boost::asio::buffer(len_),
        [self = shared_from_this(), next = std::move(next)](ErrorCode ec, std::size_t) mutable {
          if (self->closed_) return;
          if (ec) return self->End(self->owner_->failed_, "control read: " + ec.message());
          std::uint32_t n = iperf3::DecodeLength(self->len_.data());
          if (n == 0 || n > iperf3::kMaxJsonSize) {
            return self->End(self->owner_->malformed_, "JSON of " + std::to_string(n) + " bytes");
          }
          auto body = std::make_shared<std::string>(n, '\0');
          boost::asio::async_read(self->control_, boost::asio::buffer(*body),
                                  [self, body, next = std::move(next)](ErrorCode ec, std::size_t) {
                                    if (self->closed_) return;
                                    if (ec)
                                      return self->End(self->owner_->failed_,
                                                       "control read: " + ec.message());
                                    auto doc = nlohmann::json::parse(*body, nullptr, false);
                                    if (doc.is_discarded())
                                      return self->End(self->owner_->malformed_, "malformed JSON");
                                    next(std::move(doc));
                                  });
        });
  }

  void ReadParams() {
    ReadJson([self = shared_from_this()](nlohmann::json doc) {
      std::string err;
      auto p = iperf3::DecodeParams(doc, &err);
      if (!p) return self->End(self->owner_->malformed_, "bad parameters: " + err);
      const auto& o = self->owner_->options_;
      if (!p->tcp || p->udp || p->sctp || p->reverse || p->bidirectional) {
        return self->Deny("only TCP tests in the forward direction are served");
      }
      if (p->time <= 0 || std::chrono::seconds(p->time + p->omit) > o.max_duration) {
        return self->Refuse(iperf3::kErrDuration, self->owner_->too_long_,
                            "test of " + std::to_string(p->time + p->omit) +
                                " s (0 = by bytes/blocks) is not within max_duration");
      }
      if (p->parallel > o.max_streams) {
        return self->Refuse(iperf3::kErrNumStreams, self->owner_->too_many_streams_,
                            std::to_string(p->parallel) + " streams is more than max_streams");
      }
      self->params_ = *p;
      self->wants_streams_ = true;
      self->Arm(kStreamsTimeout + kStreamTime * p->parallel, "data streams");
      self->WriteState(iperf3::kCreateStreams, [] {});
    });
  }

  void Run() {
    start_ = Clock::now();
    cpu_start_ = net::ReadThreadCpu();
    Arm(std::chrono::seconds(params_.time + params_.omit) + kEndGrace, "TEST_END");
    ArmProgress();
    for (std::size_t i = 0; i < streams_.size(); ++i) ReadStream(i);
    ReadControlDuringTest();
  }

  // Reads what `s` has, without blocking, at most `reads` times (MSG_TRUNC: Linux TCP discards
  // the bytes in the kernel instead of copying them out — the payload is never looked at, so
  // the receiver's CPU per byte is well below a copying reader's). False once the stream is
  // done (EOF or an error: the control connection decides what that means).
  bool Drain(Stream& s, int reads) {
    bool open = true;
    std::uint64_t got = 0;
    for (int k = 0; k < reads; ++k) {
      ssize_t n = ::recv(s.socket.native_handle(), s.buffer.data(), s.buffer.size(),
                         MSG_TRUNC | MSG_DONTWAIT);
      if (n > 0) {
        got += static_cast<std::uint64_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      open = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      break;
    }
    s.bytes += got;
    window_bytes_ += got;
    if (got > 0) owner_->received_->Increment(static_cast<double>(got));
    return open;
  }

  // Reads what the socket has (bounded), then waits for more.
  void ReadStream(std::size_t i) {
    bool open = Drain(*streams_[i], 16);
    if (!open || closed_ || ended_) return;
    streams_[i]->socket.async_wait(tcp::socket::wait_read,
                                   [self = shared_from_this(), i](ErrorCode ec) {
                                     if (ec || self->closed_ || self->ended_) return;
                                     self->ReadStream(i);
                                   });
  }

  // The data phase's floor: every kDataWindow at least kMinWindowBytes, or the test stalled.
  // What the kernel already holds counts (drained first), so a loop that ran late is not
  // taken for a client that sent nothing.
  void ArmProgress() {
    progress_.expires_after(kDataWindow);
    progress_.async_wait([weak = weak_from_this()](ErrorCode ec) {
      auto self = weak.lock();
      if (ec || !self || self->closed_ || self->ended_) return;
      for (auto& s : self->streams_) self->Drain(*s, 64);
      if (self->window_bytes_ < kMinWindowBytes) {
        return self->End(self->owner_->stalled_,
                         std::to_string(self->window_bytes_) + " bytes in the last data window",
                         Outcome::kFailed);
      }
      self->window_bytes_ = 0;
      self->ArmProgress();
    });
  }

  void ReadControlDuringTest() {
    boost::asio::async_read(
        control_, boost::asio::buffer(state_, 1),
        [self = shared_from_this()](ErrorCode ec, std::size_t) {
          if (self->closed_) return;
          if (ec)
            return self->End(self->owner_->failed_,
                             "control read during the test: " + ec.message());
          auto s = static_cast<std::int8_t>(self->state_[0]);
          if (s == iperf3::kTestEnd) return self->EndOfData();
          if (s == iperf3::kClientTerminate || s == iperf3::kIperfDone) {
            return self->End(self->owner_->failed_, "client terminated the test");
          }
          self->End(self->owner_->failed_, std::string("unexpected ") + iperf3::StateName(s));
        });
  }

  void EndOfData() {
    ended_ = true;
    progress_.cancel();
    elapsed_ = std::chrono::duration<double>(Clock::now() - start_).count();
    auto cpu = net::ReadThreadCpu();
    // What already arrived counts: drain each stream without blocking (bounded).
    for (auto& s : streams_) {
      Drain(*s, 1024);
      ErrorCode ec;
      s->socket.cancel(ec);
    }
    double wall = elapsed_ > 0 ? elapsed_ : 1;
    results_.cpu_util_total = 100 * (cpu.total - cpu_start_.total) / wall;
    results_.cpu_util_user = 100 * (cpu.user - cpu_start_.user) / wall;
    results_.cpu_util_system = 100 * (cpu.system - cpu_start_.system) / wall;
    results_.sender_has_retransmits = -1;  // we are the receiver
    for (std::size_t i = 0; i < streams_.size(); ++i) {
      results_.streams.push_back(
          {iperf3::StreamId(static_cast<int>(i)), streams_[i]->bytes, -1, 0, elapsed_});
    }
    Arm(kResultsTimeout, "results");
    WriteState(iperf3::kExchangeResults, [self = shared_from_this()] {
      self->ReadJson([self](nlohmann::json doc) {
        std::string err;
        if (!iperf3::DecodeResults(doc, &err)) {
          return self->End(self->owner_->malformed_, "client results: " + err);
        }
        self->Write(iperf3::FrameJson(iperf3::EncodeResults(self->results_)), [self] {
          self->WriteState(iperf3::kDisplayResults, [self] { self->ReadDone(); });
        });
      });
    });
  }

  void ReadDone() {
    boost::asio::async_read(control_, boost::asio::buffer(state_, 1),
                            [self = shared_from_this()](ErrorCode ec, std::size_t) {
                              if (self->closed_) return;
                              // A client that closes instead of IPERF_DONE still had its test.
                              self->End(self->owner_->completed_,
                                        ec ? "closed after results" : "done", Outcome::kCompleted);
                            });
  }

  // `outcome` is what the test tells of its source (BurstAdmission): anything but a completed
  // test or our own refusal is a failure (a deadline, the data floor, a client that broke off
  // or sent nonsense).
  void End(const ResponderDrop& refusal, const std::string& why,
           Outcome outcome = Outcome::kFailed) {
    if (closed_) return;
    refusal.dropped->Increment();
    End(refusal.requests, why, outcome);
  }
  void End(prometheus::Counter* outcome_counter, const std::string& why,
           Outcome outcome = Outcome::kFailed) {
    if (closed_) return;
    outcome_counter->Increment();
    std::uint64_t total = 0;
    for (auto& s : streams_) total += s->bytes;
    SPDLOG_DEBUG("burst responder: test from {} ended ({}): {} streams, {} bytes", peer_, why,
                 streams_.size(), total);
    Close();
    owner_->Remove(this, outcome);
  }

  Impl* owner_;  // outlives every test: its io_ is destroyed last
  tcp::socket control_;
  std::string cookie_;
  Address source_;
  boost::asio::steady_timer deadline_;
  boost::asio::steady_timer progress_;
  std::string peer_;
  iperf3::Params params_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::array<unsigned char, 4> len_{};
  std::array<unsigned char, 1> state_{};
  bool wants_streams_ = false;
  bool ended_ = false;
  bool closed_ = false;
  Clock::time_point start_{};
  std::uint64_t window_bytes_ = 0;  // payload since the last progress check
  double elapsed_ = 0;
  net::ThreadCpu cpu_start_{};
  iperf3::Results results_;
};

void BurstResponder::Impl::Dispatch(tcp::socket socket, const std::string& cookie,
                                    const Address& source) {
  for (auto& t : tests_) {
    if (t->cookie() == cookie) {
      if (t->wants_streams()) t->AddStream(std::move(socket));
      return;  // a stream for a test not expecting one: dropped
    }
  }
  auto d = admission_.Ask(source, Clock::now());
  if (d.bumped) {
    if (auto w = TakeWaiting(*d.bumped)) Deny(std::move(w->socket), busy_);
  }
  switch (d.verdict) {
    case BurstAdmission::Verdict::kAdmit:
      return StartTest(std::move(socket), cookie, source);
    case BurstAdmission::Verdict::kWait:
      Wait(std::move(socket), cookie, source);
      return Rebalance();
    case BurstAdmission::Verdict::kBusy:
      return Deny(std::move(socket), busy_);
    case BurstAdmission::Verdict::kPenalty:
      return Deny(std::move(socket), penalty_);
  }
}

void BurstResponder::Impl::StartTest(tcp::socket socket, const std::string& cookie,
                                     const Address& source) {
  auto t = std::make_shared<Test>(this, std::move(socket), cookie, source);
  tests_.push_back(t);
  active_ = static_cast<int>(tests_.size());
  t->Begin();
}

void BurstResponder::Impl::Wait(tcp::socket socket, const std::string& cookie,
                                const Address& source) {
  auto w = std::make_shared<Waiting>(std::move(socket), io_);
  w->cookie = cookie;
  w->source = source;
  waiting_[source] = w;
  w->timer.expires_after(kMaxWait);
  w->timer.async_wait([this, w](ErrorCode ec) {
    auto it = waiting_.find(w->source);
    if (ec || it == waiting_.end() || it->second != w) return;
    admission_.Withdraw(w->source);
    TakeWaiting(w->source);
    Deny(std::move(w->socket), busy_);
  });
  WatchWaiting(w);
}

// A waiting client sends nothing until PARAM_EXCHANGE: the connection becoming readable means
// it closed (it gave up: busy, as if refused) or broke the protocol (malformed).
void BurstResponder::Impl::WatchWaiting(const std::shared_ptr<Waiting>& w) {
  w->socket.async_wait(tcp::socket::wait_read, [this, w](ErrorCode ec) {
    auto it = waiting_.find(w->source);
    if (ec || it == waiting_.end() || it->second != w) return;
    char byte;
    ssize_t n = ::recv(w->socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      return WatchWaiting(w);
    }
    admission_.Withdraw(w->source);
    TakeWaiting(w->source);
    ErrorCode ignored;
    w->socket.close(ignored);
    (n > 0 ? malformed_ : busy_).Count();
  });
}

std::shared_ptr<BurstResponder::Impl::Waiting> BurstResponder::Impl::TakeWaiting(
    const Address& source) {
  auto it = waiting_.find(source);
  if (it == waiting_.end()) return nullptr;
  auto w = it->second;
  waiting_.erase(it);
  ErrorCode ignored;
  w->timer.cancel();
  w->socket.cancel(ignored);  // its readiness wait completes as aborted; nothing was read
  return w;
}

void BurstResponder::Impl::Deny(tcp::socket socket, const ResponderDrop& why) {
  why.Count();
  auto s = std::make_shared<tcp::socket>(std::move(socket));
  auto byte = std::make_shared<char>(static_cast<char>(iperf3::kAccessDenied));
  boost::asio::async_write(*s, boost::asio::buffer(byte.get(), 1),
                           [s, byte](ErrorCode, std::size_t) {});
}

void BurstResponder::Impl::Rebalance() {
  if (rebalancing_) return;  // a preempted test's Remove, inside the loop below
  rebalancing_ = true;
  // Each pass starts a test or ends one: bounded by the slots and the line.
  for (int pass = 0; pass < 4 * (options_.max_clients + 16); ++pass) {
    auto now = Clock::now();
    if (auto source = admission_.Promote(now)) {
      if (auto w = TakeWaiting(*source)) {
        StartTest(std::move(w->socket), w->cookie, w->source);
      } else {
        admission_.Release(*source, Outcome::kRefused, now);  // cannot happen: kept in step
      }
      continue;
    }
    auto victim = admission_.Victim(now);
    if (!victim) break;
    // Its youngest test gives way (the older one has come further).
    auto it = std::find_if(tests_.rbegin(), tests_.rend(),
                           [&](const auto& t) { return t->source() == *victim; });
    if (it == tests_.rend()) break;
    auto t = *it;
    t->Preempt();
  }
  rebalancing_ = false;
}

void BurstResponder::Impl::Stop() {
  // Handlers still queued are destroyed with io_ (the last member to go), closing their
  // sockets; nothing they hold points back at this object's ownership.
  boost::asio::post(io_, [this] {
    ErrorCode ignored;
    acceptor_.close(ignored);
    for (auto& t : tests_) t->Close();
    tests_.clear();
    for (auto& p : pending_) p->socket.close(ignored);
    pending_.clear();
    for (auto& [source, w] : waiting_) {
      w->timer.cancel();
      w->socket.close(ignored);
    }
    waiting_.clear();
    io_.stop();
  });
  if (thread_.joinable()) thread_.join();
}

void BurstResponder::Impl::Remove(Test* t, Outcome outcome) {
  Address source = t->source();  // `t` may go with the list's reference
  tests_.remove_if([t](const std::shared_ptr<Test>& p) { return p.get() == t; });
  active_ = static_cast<int>(tests_.size());
  admission_.Release(source, outcome, Clock::now());
  Rebalance();
}

BurstResponder::BurstResponder(const probes::burst::BurstResponderOptions& options,
                               prometheus::Registry& registry)
    : impl_(std::make_unique<Impl>(options, registry)) {
  impl_->Start();
}

BurstResponder::~BurstResponder() { impl_->Stop(); }

std::uint16_t BurstResponder::port() const { return impl_->port(); }
int BurstResponder::active_tests() const { return impl_->active(); }
void BurstResponder::AdmitSources(std::vector<boost::asio::ip::address> sources) {
  impl_->AdmitSources(std::move(sources));
}

}  // namespace podnet::responders
