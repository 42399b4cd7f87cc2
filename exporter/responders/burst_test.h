#pragma once

// One iperf3 test of the burst responder (BurstResponder::Impl::Test): its control connection,
// its streams, and the protocol's steps, each within its deadline. Internal to the responders
// module: included by burst_server.cc only.

#include "exporter/responders/burst_server_impl.h"

namespace podnet::responders {

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

}  // namespace podnet::responders
