#include "exporter/probes/burst/burst_client.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "exporter/net/tcp_info.h"
#include "exporter/wire/iperf3.h"

namespace podnet::probes::burst {

namespace iperf3 = wire::iperf3;
namespace {

using boost::asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using ErrorCode = boost::system::error_code;

// Blocks written per wake-up of a stream before it yields to the loop (timers, other streams).
constexpr int kWritesPerWakeup = 16;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class Client : public BurstClient, public std::enable_shared_from_this<Client> {
 public:
  Client(boost::asio::io_context& io, BurstRequest req, Done done)
      : io_(io),
        req_(std::move(req)),
        done_(std::move(done)),
        control_(io),
        deadline_(io),
        end_timer_(io),
        sample_timer_(io),
        block_(req_.block_size, '\0') {
    std::mt19937_64 rng(std::random_device{}());
    cookie_ = iperf3::MakeCookie(rng);
    // Not all zeros: a path that compresses (some VPNs) must not flatter the figure.
    for (std::size_t i = 0; i < block_.size(); ++i) block_[i] = static_cast<char>(rng() & 0xff);
    streams_.reserve(static_cast<std::size_t>(std::max(1, req_.streams)));
    for (int i = 0; i < req_.streams; ++i) streams_.push_back(std::make_unique<Stream>(io));
  }

  void Begin() {
    ArmDeadline(req_.step_timeout, "connecting the control connection");
    control_.async_connect(req_.server, [self = shared_from_this()](ErrorCode ec) {
      if (self->finished_) return;
      if (ec) return self->Fail("connect", "control connection: " + ec.message());
      ErrorCode ignored;
      self->control_.set_option(tcp::no_delay(true), ignored);
      self->WriteControl(self->cookie_, [self] {
        self->Expect(iperf3::kParamExchange, [self] { self->SendParams(); });
      });
    });
  }

  void Cancel() override { Fail("cancelled", "cancelled"); }

 private:
  struct Stream {
    explicit Stream(boost::asio::io_context& io) : socket(io) {}
    tcp::socket socket;
    std::uint64_t bytes = 0;
    std::uint64_t bytes_at_sample = 0;
    std::uint32_t retrans_start = 0;
    std::uint32_t retrans_at_sample = 0;
    std::uint64_t max_cwnd = 0;
    net::TcpInfo last{};
  };

  // ---- control connection helpers -------------------------------------------------------

  void ArmDeadline(config::Duration after, std::string what) {
    deadline_.expires_after(after);
    deadline_.async_wait([weak = weak_from_this(), what = std::move(what)](ErrorCode ec) {
      auto self = weak.lock();
      if (ec || !self || self->finished_) return;
      self->Fail("timeout", "no progress within the deadline while " + what);
    });
  }

  void WriteControl(std::string bytes, std::function<void()> next) {
    auto buf = std::make_shared<std::string>(std::move(bytes));
    control_bytes_ += buf->size();
    boost::asio::async_write(
        control_, boost::asio::buffer(*buf),
        [self = shared_from_this(), buf, next = std::move(next)](ErrorCode ec, std::size_t) {
          if (self->finished_) return;
          if (ec) return self->Fail("connection_lost", "control write: " + ec.message());
          next();
        });
  }

  // Reads one state byte and requires `want`; ACCESS_DENIED and SERVER_ERROR end the burst.
  void Expect(std::int8_t want, std::function<void()> next) {
    ArmDeadline(req_.step_timeout, std::string("waiting for ") + iperf3::StateName(want));
    boost::asio::async_read(
        control_, boost::asio::buffer(state_byte_, 1),
        [self = shared_from_this(), want, next = std::move(next)](ErrorCode ec, std::size_t) {
          if (self->finished_) return;
          if (ec) {
            return self->Fail("connection_lost", std::string("control read, waiting for ") +
                                                     iperf3::StateName(want) + ": " + ec.message());
          }
          auto got = static_cast<std::int8_t>(self->state_byte_[0]);
          if (got == want) return next();
          if (got == iperf3::kAccessDenied) {
            return self->Fail("access_denied", "the server is busy or refused the test");
          }
          if (got == iperf3::kServerError) return self->ReadServerError();
          self->Fail("protocol", std::string("expected ") + iperf3::StateName(want) + ", got " +
                                     iperf3::StateName(got) + " (" + std::to_string(got) + ")");
        });
  }

  void ReadServerError() {
    boost::asio::async_read(
        control_, boost::asio::buffer(error_bytes_),
        [self = shared_from_this()](ErrorCode ec, std::size_t) {
          if (self->finished_) return;
          std::string detail = "SERVER_ERROR";
          if (!ec) {
            auto i_errno =
                static_cast<std::int32_t>(iperf3::DecodeLength(self->error_bytes_.data()));
            auto err =
                static_cast<std::int32_t>(iperf3::DecodeLength(self->error_bytes_.data() + 4));
            detail += " i_errno=" + std::to_string(i_errno) + " errno=" + std::to_string(err);
          }
          self->Fail("server_error", detail);
        });
  }

  void ReadJson(std::function<void(nlohmann::json)> next) {
    ArmDeadline(req_.step_timeout, "reading the server's results");
    boost::asio::async_read(
        control_, boost::asio::buffer(length_bytes_),
        [self = shared_from_this(), next = std::move(next)](ErrorCode ec, std::size_t) mutable {
          if (self->finished_) return;
          if (ec)
            return self->Fail("connection_lost", "control read (JSON length): " + ec.message());
          std::uint32_t n = iperf3::DecodeLength(self->length_bytes_.data());
          if (n == 0 || n > iperf3::kMaxJsonSize) {
            return self->Fail("protocol", "JSON document of " + std::to_string(n) + " bytes");
          }
          auto body = std::make_shared<std::string>(n, '\0');
          boost::asio::async_read(
              self->control_, boost::asio::buffer(*body),
              [self, body, next = std::move(next)](ErrorCode ec, std::size_t) {
                if (self->finished_) return;
                if (ec)
                  return self->Fail("connection_lost", "control read (JSON): " + ec.message());
                auto doc = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
                if (doc.is_discarded()) return self->Fail("protocol", "malformed JSON results");
                next(std::move(doc));
              });
        });
  }

  // ---- the test ---------------------------------------------------------------------------

  void SendParams() {
    iperf3::Params p;
    // iperf3 counts whole seconds; the server only uses it for its own give-up timer, the
    // client ends the test with TEST_END, so round up.
    auto secs = std::chrono::ceil<std::chrono::seconds>(req_.duration).count();
    p.time = static_cast<int>(std::max<std::int64_t>(1, secs));
    p.parallel = req_.streams;
    p.len = static_cast<std::int64_t>(req_.block_size);
    WriteControl(iperf3::FrameJson(iperf3::EncodeParams(p)), [self = shared_from_this()] {
      self->Expect(iperf3::kCreateStreams, [self] { self->ConnectStreams(); });
    });
  }

  void ConnectStreams() {
    ArmDeadline(req_.step_timeout, "connecting the data streams");
    // One at a time: the server matches streams to ids by accept order.
    ConnectStream(0);
  }

  void ConnectStream(std::size_t i) {
    if (i == streams_.size()) {
      return Expect(iperf3::kTestStart, [self = shared_from_this()] {
        self->Expect(iperf3::kTestRunning, [self] { self->StartData(); });
      });
    }
    Stream& s = *streams_[i];
    s.socket.async_connect(req_.server, [self = shared_from_this(), i](ErrorCode ec) {
      if (self->finished_) return;
      if (ec) return self->Fail("connect", "data stream: " + ec.message());
      boost::asio::async_write(self->streams_[i]->socket, boost::asio::buffer(self->cookie_),
                               [self, i](ErrorCode ec, std::size_t) {
                                 if (self->finished_) return;
                                 if (ec)
                                   return self->Fail("connection_lost",
                                                     "data stream cookie: " + ec.message());
                                 self->ConnectStream(i + 1);
                               });
    });
  }

  void StartData() {
    data_start_ = Clock::now();
    last_sample_ = data_start_;
    cpu_start_ = net::ReadThreadCpu();
    for (auto& s : streams_) {
      if (auto ti = net::ReadTcpInfo(s->socket.native_handle())) {
        s->retrans_start = ti->total_retrans;
        s->retrans_at_sample = ti->total_retrans;
      }
    }
    sending_ = true;
    // The data phase's own deadline: a stalled peer cannot hold us past duration + step.
    ArmDeadline(req_.duration + req_.step_timeout, "sending data");
    end_timer_.expires_at(data_start_ + req_.duration);
    end_timer_.async_wait([weak = weak_from_this()](ErrorCode ec) {
      auto self = weak.lock();
      if (ec || !self || self->finished_) return;
      self->EndData();
    });
    ArmSample();
    for (std::size_t i = 0; i < streams_.size(); ++i) Write(i);
  }

  // Writes as much as the socket takes now (non-blocking send() in a bounded loop, as iperf3's
  // select loop does), then waits for room. One completion per socket-buffer refill instead of
  // one per block keeps the sender's CPU per byte at iperf3's level.
  void Write(std::size_t i) {
    Stream& s = *streams_[i];
    int fd = s.socket.native_handle();
    for (int k = 0; k < kWritesPerWakeup; ++k) {
      std::uint64_t left = req_.max_bytes > bytes_sent_ ? req_.max_bytes - bytes_sent_ : 0;
      if (left == 0) {
        budget_cut_ = true;
        return EndData();
      }
      std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(block_.size(), left));
      ssize_t w = ::send(fd, block_.data(), n, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) {
        s.bytes += static_cast<std::uint64_t>(w);
        bytes_sent_ += static_cast<std::uint64_t>(w);
        continue;
      }
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        s.socket.async_wait(tcp::socket::wait_write, [self = shared_from_this(), i](ErrorCode ec) {
          if (self->finished_ || !self->sending_) return;
          if (ec) {
            return self->Fail("connection_lost", "data stream wait: " + ec.message());
          }
          self->Write(i);
        });
        return;
      }
      if (w < 0 && errno == EINTR) continue;
      return Fail("connection_lost", std::string("data stream write: ") + std::strerror(errno));
    }
    // The socket keeps taking data: yield to the loop (timers, other streams), then go on.
    boost::asio::post(io_, [self = shared_from_this(), i] {
      if (self->finished_ || !self->sending_) return;
      self->Write(i);
    });
  }

  void ArmSample() {
    sample_timer_.expires_at(last_sample_ + req_.sample_interval);
    sample_timer_.async_wait([weak = weak_from_this()](ErrorCode ec) {
      auto self = weak.lock();
      if (ec || !self || self->finished_ || !self->sending_) return;
      self->Sample(Clock::now());
      self->ArmSample();
    });
  }

  // Reads TCP_INFO of every stream and closes the interval ending at `now`.
  void Sample(Clock::time_point now) {
    IntervalSample iv;
    iv.start_seconds = Seconds(last_sample_ - data_start_);
    iv.end_seconds = Seconds(now - data_start_);
    double rtt_sum = 0;
    int rtt_n = 0;
    for (auto& s : streams_) {
      iv.bytes += s->bytes - s->bytes_at_sample;
      s->bytes_at_sample = s->bytes;
      auto ti = net::ReadTcpInfo(s->socket.native_handle());
      if (!ti) continue;
      s->last = *ti;
      iv.retransmits += ti->total_retrans - s->retrans_at_sample;
      s->retrans_at_sample = ti->total_retrans;
      iv.snd_cwnd_bytes += ti->snd_cwnd_bytes;
      s->max_cwnd = std::max(s->max_cwnd, ti->snd_cwnd_bytes);
      if (ti->rtt_us > 0) {
        rtt_sum += ti->rtt_us * 1e-6;
        ++rtt_n;
      }
    }
    iv.rtt_seconds = rtt_n > 0 ? rtt_sum / rtt_n : 0;
    if (iv.end_seconds > iv.start_seconds) intervals_.push_back(iv);
    last_sample_ = now;
  }

  void EndData() {
    if (!sending_ || finished_) return;
    sending_ = false;
    auto now = Clock::now();
    data_seconds_ = Seconds(now - data_start_);
    auto cpu = net::ReadThreadCpu();
    cpu_.total = cpu.total - cpu_start_.total;
    cpu_.user = cpu.user - cpu_start_.user;
    cpu_.system = cpu.system - cpu_start_.system;
    Sample(now);
    end_timer_.cancel();
    sample_timer_.cancel();
    // Writes still queued in the reactor are abandoned: what they would add is not counted.
    for (auto& s : streams_) {
      ErrorCode ignored;
      s->socket.cancel(ignored);
    }
    WriteControl(std::string(1, static_cast<char>(iperf3::kTestEnd)), [self = shared_from_this()] {
      self->Expect(iperf3::kExchangeResults, [self] { self->ExchangeResults(); });
    });
  }

  void ExchangeResults() {
    iperf3::Results ours;
    double wall = data_seconds_ > 0 ? data_seconds_ : 1;
    ours.cpu_util_total = 100 * cpu_.total / wall;
    ours.cpu_util_user = 100 * cpu_.user / wall;
    ours.cpu_util_system = 100 * cpu_.system / wall;
    ours.sender_has_retransmits = 1;
    for (std::size_t i = 0; i < streams_.size(); ++i) {
      const Stream& s = *streams_[i];
      ours.streams.push_back({iperf3::StreamId(static_cast<int>(i)), s.bytes,
                              static_cast<std::int64_t>(s.last.total_retrans - s.retrans_start), 0,
                              data_seconds_});
    }
    WriteControl(iperf3::FrameJson(iperf3::EncodeResults(ours)), [self = shared_from_this()] {
      self->ReadJson([self](nlohmann::json doc) {
        std::string err;
        auto theirs = iperf3::DecodeResults(doc, &err);
        if (!theirs) return self->Fail("protocol", "server results: " + err);
        self->server_results_ = std::move(*theirs);
        self->Expect(iperf3::kDisplayResults, [self] {
          self->WriteControl(std::string(1, static_cast<char>(iperf3::kIperfDone)),
                             [self] { self->Finish({}, {}); });
        });
      });
    });
  }

  // ---- the end ------------------------------------------------------------------------------

  void Fail(std::string reason, std::string detail) {
    Finish(std::move(reason), std::move(detail));
  }

  // The wire bytes of `sock` into r's totals, from the kernel's own counters, read before the
  // socket closes (`fallback_sent` when the kernel has none); `hdr`: TCP/IP header bytes.
  static void AddWireBytes(tcp::socket& sock, std::uint64_t fallback_sent, std::uint64_t hdr,
                           BurstResult& r) {
    if (!sock.is_open()) return;
    auto ti = net::ReadTcpInfo(sock.native_handle());
    if (!ti) return;
    // Bytes still queued in the send buffer go out before the graceful close: count them,
    // with one header per MSS they will need, or the bill runs short of what we wrote.
    std::uint64_t sent = ti->bytes_sent > 0 ? ti->bytes_sent + ti->notsent_bytes : fallback_sent;
    std::uint64_t segs = ti->segs_out;
    if (ti->snd_mss > 0) segs += (ti->notsent_bytes + ti->snd_mss - 1) / ti->snd_mss;
    r.wire_bytes_sent += sent + segs * hdr;
    r.wire_bytes_received += ti->bytes_received + std::uint64_t{ti->segs_in} * hdr;
  }

  // The mean RTT of the intervals, and each stream's summary and wire bytes into r.
  void AddStreams(std::uint64_t hdr, BurstResult& r) {
    double rtt_sum = 0;
    int rtt_n = 0;
    for (const auto& iv : r.intervals) {
      if (iv.rtt_seconds > 0) {
        rtt_sum += iv.rtt_seconds;
        ++rtt_n;
      }
    }
    r.rtt_seconds = rtt_n > 0 ? rtt_sum / rtt_n : 0;
    for (std::size_t i = 0; i < streams_.size(); ++i) {
      Stream& s = *streams_[i];
      AddWireBytes(s.socket, s.bytes, hdr, r);
      StreamSummary ss;
      ss.bytes_sent = s.bytes;
      ss.retransmits =
          s.last.total_retrans >= s.retrans_start ? s.last.total_retrans - s.retrans_start : 0;
      ss.rtt_seconds = s.last.rtt_us * 1e-6;
      ss.max_snd_cwnd_bytes = s.max_cwnd;
      ss.pmtu = s.last.pmtu;
      r.retransmits += ss.retransmits;
      r.snd_cwnd_bytes += ss.max_snd_cwnd_bytes;
      r.pmtu = std::max(r.pmtu, ss.pmtu);
      r.streams.push_back(ss);
    }
  }

  // What the server said it received (its results), per stream, and the throughput from it.
  void AddServerResults(BurstResult& r) const {
    if (!server_results_) return;
    r.server_sender_has_retransmits = server_results_->sender_has_retransmits;
    for (const auto& sr : server_results_->streams) {
      r.bytes_received += sr.bytes;
      for (std::size_t i = 0; i < streams_.size(); ++i) {
        if (iperf3::StreamId(static_cast<int>(i)) == sr.id) r.streams[i].bytes_received = sr.bytes;
      }
    }
    if (r.seconds > 0) {
      r.throughput_bytes_per_second = static_cast<double>(r.bytes_received) / r.seconds;
    }
  }

  void Finish(std::string error, std::string detail) {
    if (finished_) return;
    finished_ = true;
    if (sending_) {
      sending_ = false;
      data_seconds_ = Seconds(Clock::now() - data_start_);
    }
    BurstResult r;
    r.error = std::move(error);
    r.detail = std::move(detail);
    r.seconds = data_seconds_;
    r.budget_cut = budget_cut_;
    r.bytes_sent = bytes_sent_;
    r.cpu_seconds = cpu_.total;
    r.cpu_user_seconds = cpu_.user;
    r.cpu_system_seconds = cpu_.system;
    r.intervals = std::move(intervals_);
    std::uint64_t hdr = net::TcpIpHeaderBytes(req_.server.address().is_v6());
    AddWireBytes(control_, control_bytes_, hdr, r);
    AddStreams(hdr, r);
    AddServerResults(r);
    ErrorCode ignored;
    deadline_.cancel();
    end_timer_.cancel();
    sample_timer_.cancel();
    control_.close(ignored);
    for (auto& s : streams_) s->socket.close(ignored);
    // Completion handlers of the closed sockets still hold `this`; the callback runs after them.
    boost::asio::post(io_, [self = shared_from_this(), r = std::move(r)] {
      if (auto done = std::exchange(self->done_, nullptr)) done(r);
    });
  }

  boost::asio::io_context& io_;
  BurstRequest req_;
  Done done_;
  tcp::socket control_;
  boost::asio::steady_timer deadline_;
  boost::asio::steady_timer end_timer_;
  boost::asio::steady_timer sample_timer_;
  std::string cookie_;
  std::string block_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::array<unsigned char, 1> state_byte_{};
  std::array<unsigned char, 8> error_bytes_{};
  std::array<unsigned char, 4> length_bytes_{};
  std::uint64_t control_bytes_ = 0;
  std::uint64_t bytes_sent_ = 0;
  bool sending_ = false;
  bool budget_cut_ = false;
  bool finished_ = false;
  Clock::time_point data_start_{};
  Clock::time_point last_sample_{};
  double data_seconds_ = 0;
  net::ThreadCpu cpu_start_{};
  net::ThreadCpu cpu_{};
  std::vector<IntervalSample> intervals_;
  std::optional<iperf3::Results> server_results_;
};

}  // namespace

std::shared_ptr<BurstClient> BurstClient::Start(boost::asio::io_context& io, BurstRequest request,
                                                Done done) {
  auto c = std::make_shared<Client>(io, std::move(request), std::move(done));
  c->Begin();
  return c;
}

}  // namespace podnet::probes::burst
