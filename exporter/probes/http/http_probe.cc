#include "exporter/probes/http/http_probe.h"

#include <spdlog/spdlog.h>
#include <sys/prctl.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "exporter/metrics/buckets.h"
#include "exporter/metrics/families.h"
#include "exporter/net/address.h"
#include "exporter/net/http_client.h"
#include "exporter/probes/peer_probe.h"

namespace podnet::probes::http {
namespace {

using tcp = boost::asio::ip::tcp;
// The client connection this kind shares with the service kind (net/http_client.h).
using net::http_client::Clock;
using net::http_client::Exchange;
using net::http_client::Failure;
using net::http_client::FailureReason;
using net::http_client::HttpConnection;
using net::http_client::Reconnect;
using net::http_client::ReconnectReason;

// Declared in `r` each time the kind is made (prometheus-cpp merges a re-declaration).
struct HttpFamilies {
  metrics::Metrics& r;
  metrics::HistogramFamily duration =
      metrics::DeclareHistogram(r, "podnet_http_request_duration_seconds",
                                "HTTP request latency of 2xx responses, from the request's start "
                                "(its intended start when it started late) to the last byte of the "
                                "final response (after any 1xx); connect included for "
                                "connection=\"new\", and a retry on a new connection included.",
                                metrics::LatencyBuckets());
  metrics::HistogramFamily ttfb =
      metrics::DeclareHistogram(r, "podnet_http_time_to_first_byte_seconds",
                                "HTTP time from writing the request to the first byte of the final "
                                "response (interim 1xx responses are skipped, RFC 9110 15.2).",
                                metrics::LatencyBuckets());
  metrics::CounterFamily& reconnects =
      metrics::DeclareCounter(r, "podnet_http_reconnects_total",
                              "Keep-alive connections replaced by a new one: the peer closed "
                              "it while idle (idle_closed), sent unrequested bytes on it "
                              "(idle_data), or a request on it got no response byte and was "
                              "retried once on a new connection (retried).");
  metrics::HistogramFamily connect = metrics::DeclareHistogram(
      r, "podnet_http_connect_duration_seconds",
      "TCP connect time of the HTTP probe's connections.", metrics::LatencyBuckets());
  metrics::CounterFamily& requests =
      metrics::DeclareCounter(r, "podnet_http_requests_total",
                              "HTTP requests by connection mode and status code (\"error\": no "
                              "complete response, see podnet_probe_errors_total).");
  metrics::CounterFamily& late = metrics::DeclareCounter(
      r, "podnet_http_late_requests_total",
      "HTTP requests that started more than 1 ms after their intended start "
      "(open-loop schedule fell behind).");
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class HttpKind : public ProbeKind, public std::enable_shared_from_this<HttpKind> {
 public:
  HttpKind(const HttpOptions& options, ProbeEnv& env)
      : options_(options), env_(env), families_{env.metrics} {
    // Made on the probe loop's thread: 1 µs timer slack (default 50 µs) so that paced requests
    // leave on time.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  }
  std::string_view name() const override { return "http"; }
  config::Duration interval() const override { return options_.interval; }
  std::shared_ptr<PeerProbe> ForPeer(const topology::Peer& peer) override;

  const HttpOptions& options() const { return options_; }
  ProbeEnv& env() { return env_; }
  HttpFamilies& families() { return families_; }

 private:
  HttpOptions options_;
  ProbeEnv& env_;
  HttpFamilies families_;
};

class HttpPeerProbe : public PeerProbeBase {
 public:
  HttpPeerProbe(std::shared_ptr<HttpKind> kind, const topology::Peer& peer)
      : PeerProbeBase(kind->env(), "http", peer),
        kind_(std::move(kind)),
        opt_(kind_->options()),
        endpoint_(peer.address, peer.port),
        host_(net::FormatHostPort(peer.address, peer.port)),
        timer_(env().io) {
    auto& f = kind_->families();
    for (int m = 0; m < 2; ++m) {
      prometheus::Labels l{{"connection", ModeLabel(m == 1)}};
      m_[m].duration = AddSeries(f.duration, l);
      m_[m].ttfb = AddSeries(f.ttfb, l);
      m_[m].late = &AddSeries(f.late, l);
    }
    connect_ = AddSeries(f.connect, {});
    std::tie(sent_bytes_, received_bytes_) = AddByteCounters();
  }

 private:
  void StartRound(Clock::time_point scheduled) override {
    modes_.clear();
    if (opt_.keepalive) modes_.push_back(true);
    if (opt_.new_connection) modes_.push_back(false);
    next_mode_ = 0;
    StartMode(scheduled);
  }

  void StopRound() override {
    timer_.cancel();
    CloseAll();
  }

  void CloseAll() {
    for (auto& s : slots_) {
      if (!s.conn) continue;
      s.conn->Close();
      Charge(*s.conn);
    }
    slots_.clear();
  }

  // The probe's bytes are its connections' wire bytes from the kernel (TCP_INFO), taken after
  // each request and at each close: request and response with headers, handshakes, ACKs, FINs.
  void Charge(HttpConnection& c) {
    auto w = c.TakeWireBytes();
    if (!series()) return;
    sent_bytes_->Increment(static_cast<double>(w.sent));
    received_bytes_->Increment(static_cast<double>(w.received));
  }

  enum class SlotState { kClosed, kConnecting, kIdle, kBusy };
  struct Slot {
    std::shared_ptr<HttpConnection> conn;
    SlotState state = SlotState::kClosed;
  };

  static const char* ModeLabel(bool new_connection) { return new_connection ? "new" : "keepalive"; }

  // One mode's timed run: requests 0..n_-1 at t0_ + i/qps.
  void StartMode(Clock::time_point scheduled) {
    if (next_mode_ >= modes_.size()) return EndRound();
    keepalive_ = modes_[next_mode_++];
    NextGeneration();
    n_ = std::max<long long>(
        1, static_cast<long long>(std::chrono::duration<double>(opt_.duration).count() * opt_.qps));
    next_index_ = 0;
    finished_ = 0;
    queue_.clear();
    slots_.assign(static_cast<std::size_t>(opt_.connections), Slot{});
    if (!keepalive_) {
      BeginSchedule(std::max(scheduled, Clock::now()));
      return;
    }
    // Keep-alive: open the connections first; the timed run starts when all have answered.
    // Failures here are not counted: the requests that follow retry and count them.
    pending_connects_ = static_cast<int>(slots_.size());
    auto deadline = Clock::now() + opt_.timeout;
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      slots_[i].conn = NewConnection();
      slots_[i].state = SlotState::kConnecting;
      auto started = Clock::now();
      slots_[i].conn->Connect(
          deadline,
          IfCurrent(this, [i, started, scheduled](auto& self, Failure f, Clock::time_point at) {
            Slot& s = self.slots_[i];
            if (f == Failure::kNone) {
              s.state = SlotState::kIdle;
              self.connect_.Observe(Seconds(at - started));
            } else {
              s.state = SlotState::kClosed;
              self.Charge(*s.conn);
              s.conn.reset();
              SPDLOG_DEBUG("http keep-alive connect failed peer={} reason={}", self.peer().name,
                           FailureReason(f));
            }
            if (--self.pending_connects_ == 0)
              self.BeginSchedule(std::max(scheduled, Clock::now()));
          }));
    }
  }

  std::shared_ptr<HttpConnection> NewConnection() {
    return std::make_shared<HttpConnection>(env().io, endpoint_, host_, opt_.path,
                                            opt_.max_body_bytes);
  }

  Clock::time_point Intended(long long i) const {
    return t0_ + std::chrono::nanoseconds(i * 1'000'000'000LL / opt_.qps);
  }

  void BeginSchedule(Clock::time_point t0) {
    t0_ = t0;
    Pace();
  }

  // Dispatches every request whose time has come, then sleeps until the next one's.
  void Pace() {
    auto now = Clock::now();
    while (next_index_ < n_ && Intended(next_index_) <= now) Dispatch(next_index_++, now);
    if (next_index_ >= n_) return;
    timer_.expires_at(Intended(next_index_));
    timer_.async_wait(IfCurrent(this, [](auto& self, boost::system::error_code ec) {
      if (!ec) self.Pace();
    }));
  }

  void Dispatch(long long i, Clock::time_point now) {
    if (ExpiredWhileQueued(i, now)) return;  // the loop stalled for longer than the timeout
    // Keep-alive prefers an idle connection, then reopens a closed one; new_connection takes
    // any free slot.
    std::optional<std::size_t> pick;
    for (std::size_t s = 0; s < slots_.size() && !pick; ++s) {
      if (slots_[s].state == SlotState::kIdle) pick = s;
    }
    for (std::size_t s = 0; s < slots_.size() && !pick; ++s) {
      if (slots_[s].state == SlotState::kClosed) pick = s;
    }
    if (!pick) {
      queue_.push_back(i);  // all connections busy: it starts late
      return;
    }
    Start(*pick, i, now - Intended(i) > kLateThreshold);
  }

  // A request whose whole timeout passed while it waited for a connection: never sent.
  bool ExpiredWhileQueued(long long i, Clock::time_point now) {
    if (now < Intended(i) + opt_.timeout) return false;
    int m = keepalive_ ? 0 : 1;
    m_[m].late->Increment();
    Exchange ex;
    ex.failure = Failure::kTimeout;
    Finish(0, i, Intended(i), ex, /*slot_used=*/false);
    return true;
  }

  void Start(std::size_t s, long long i, bool late) {
    auto now = Clock::now();
    Clock::time_point intended = Intended(i);
    Clock::time_point from = late ? intended : now;
    Clock::time_point deadline = intended + opt_.timeout;
    int m = keepalive_ ? 0 : 1;
    if (late) m_[m].late->Increment();
    Slot& slot = slots_[s];
    slot.state = SlotState::kBusy;
    if (slot.conn && slot.conn->is_open()) {
      // A kept-alive connection the peer closed while it was idle is not written to (curl's
      // connection check, Go's idle read): a new one takes its place.
      if (auto why = slot.conn->CheckIdle()) {
        CountReconnect(*why);
        slot.conn->Close();
      } else {
        Send(s, i, from, deadline, /*reused=*/true);
        return;
      }
    }
    ConnectAndSend(s, i, from, deadline);
  }

  void ConnectAndSend(std::size_t s, long long i, Clock::time_point from,
                      Clock::time_point deadline) {
    Slot& slot = slots_[s];
    if (slot.conn) Charge(*slot.conn);  // the closed connection this one replaces
    slot.conn = NewConnection();
    auto started = Clock::now();
    auto connected = [s, i, from, deadline, started](auto& self, Failure f, Clock::time_point at) {
      if (f != Failure::kNone) {
        Exchange ex;
        ex.failure = f;
        ex.done = at;
        self.Finish(s, i, from, ex, true);
        return;
      }
      self.connect_.Observe(Seconds(at - started));
      self.Send(s, i, from, deadline, /*reused=*/false);
    };
    slot.conn->Connect(deadline, IfCurrent(this, connected));
  }

  // A request on a reused connection that got no response byte, the connection ended (EOF or
  // RST): the peer closed it as the request went out. Sent again once on a new connection, as
  // curl and Go's Transport do; the latency keeps the original start. A request that got part
  // of a response, or that failed on a new connection, is an error.
  static bool Retryable(const Exchange& ex) {
    return ex.bytes_received == 0 &&
           (ex.failure == Failure::kClosed || ex.failure == Failure::kReset);
  }

  void Send(std::size_t s, long long i, Clock::time_point from, Clock::time_point deadline,
            bool reused) {
    slots_[s].conn->Request(
        keepalive_, deadline,
        IfCurrent(this, [s, i, from, deadline, reused](auto& self, const Exchange& ex) {
          if (reused && Retryable(ex) && Clock::now() < deadline) {
            self.CountReconnect(Reconnect::kRetried);
            self.ConnectAndSend(s, i, from, deadline);
            return;
          }
          self.Finish(s, i, from, ex, true);
        }));
  }

  void Finish(std::size_t s, long long i, Clock::time_point from, const Exchange& ex,
              bool slot_used) {
    int m = keepalive_ ? 0 : 1;
    CodeCounter(m, ex.status)->Increment();
    if (ex.failure == Failure::kNone) m_[m].duration.Observe(Seconds(ex.done - from));
    if (ex.status != 0) m_[m].ttfb.Observe(Seconds(ex.first_byte - ex.sent));
    if (ex.failure != Failure::kNone) CountError(FailureReason(ex.failure));
    ++finished_;
    if (slot_used) {
      Slot& slot = slots_[s];
      // Bad status on a kept-alive connection leaves it usable; any other failure closed it.
      bool reuse = keepalive_ && ex.keep_alive && slot.conn && slot.conn->is_open() &&
                   (ex.failure == Failure::kNone || ex.failure == Failure::kBadStatus);
      if (!reuse) {
        if (slot.conn) {
          slot.conn->Close();
          Charge(*slot.conn);
        }
        slot.conn.reset();
        slot.state = SlotState::kClosed;
      } else {
        Charge(*slot.conn);
        slot.state = SlotState::kIdle;
      }
      while (!queue_.empty()) {  // bounded by the run's request count
        long long next = queue_.front();
        queue_.pop_front();
        if (ExpiredWhileQueued(next, Clock::now())) continue;
        Start(s, next, true);
        return;  // that request's Finish checks for the end of the run
      }
    }
    if (finished_ == n_) EndMode();
  }

  void EndMode() {
    CloseAll();
    // The next mode starts from the loop, not from inside this run's call stack.
    NextGeneration();
    boost::asio::post(env().io, IfCurrent(this, [](auto& self) { self.StartMode(Clock::now()); }));
  }

  prometheus::Counter* CodeCounter(int m, int status) {
    auto key = std::pair{m, status};
    if (auto it = codes_.find(key); it != codes_.end()) return it->second;
    auto* c = &AddSeries(kind_->families().requests,
                         {{"connection", ModeLabel(m == 1)},
                          {"code", status == 0 ? "error" : std::to_string(status)}});
    codes_.emplace(key, c);
    return c;
  }

  void CountReconnect(Reconnect r) {
    SPDLOG_DEBUG("http: peer={} reconnect reason={}", peer().name, ReconnectReason(r));
    auto it = reconnects_.find(r);
    if (it == reconnects_.end()) {
      auto& c = AddSeries(kind_->families().reconnects, {{"reason", ReconnectReason(r)}});
      it = reconnects_.emplace(r, &c).first;
    }
    it->second->Increment();
  }

  struct ModeSeries {
    metrics::HistogramSeries duration;
    metrics::HistogramSeries ttfb;
    prometheus::Counter* late = nullptr;
  };

  std::shared_ptr<HttpKind> kind_;
  const HttpOptions& opt_;
  tcp::endpoint endpoint_;
  std::string host_;
  boost::asio::steady_timer timer_;
  // Series of series(), added once; no handler is current after RemoveSeries to use them.
  ModeSeries m_[2];  // [0] keepalive, [1] new
  metrics::HistogramSeries connect_;
  prometheus::Counter* sent_bytes_ = nullptr;
  prometheus::Counter* received_bytes_ = nullptr;
  std::map<std::pair<int, int>, prometheus::Counter*> codes_;
  std::map<Reconnect, prometheus::Counter*> reconnects_;

  std::vector<bool> modes_;  // true = keepalive, in run order
  std::size_t next_mode_ = 0;
  bool keepalive_ = true;  // the mode running now; each mode run is a generation of its own
  Clock::time_point t0_{};
  long long n_ = 0;
  long long next_index_ = 0;
  long long finished_ = 0;
  int pending_connects_ = 0;
  std::vector<Slot> slots_;
  std::deque<long long> queue_;  // requests waiting for a free connection
};

std::shared_ptr<PeerProbe> HttpKind::ForPeer(const topology::Peer& peer) {
  return std::make_shared<HttpPeerProbe>(shared_from_this(), peer);
}

}  // namespace

std::shared_ptr<ProbeKind> MakeHttpKind(const HttpOptions& options, ProbeEnv& env) {
  return std::make_shared<HttpKind>(options, env);
}

// Per mode a request histogram (and TTFB), a requests counter for code 200 and a late counter;
// one connect histogram.
std::size_t CountSeries(const config::Config& c, SeriesCounter& n) {
  const HttpOptions& o = *c.http;
  std::size_t modes = (o.keepalive ? 1 : 0) + (o.new_connection ? 1 : 0);
  std::size_t h = n.histogram_groups();
  const auto& b = metrics::LatencyBuckets();
  n.AddHistograms("podnet_http_request_duration_seconds", modes * h, b);
  n.AddHistograms("podnet_http_time_to_first_byte_seconds", modes * h, b);
  n.AddHistograms("podnet_http_connect_duration_seconds", h, b);
  n.Add("podnet_http_requests_total", modes * n.peers());
  n.Add("podnet_http_late_requests_total", modes * n.peers());
  return n.groups();
}

}  // namespace podnet::probes::http
