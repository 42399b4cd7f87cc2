#include "exporter/probes/service/service_probe.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "exporter/metrics/buckets.h"
#include "exporter/metrics/families.h"
#include "exporter/net/address.h"
#include "exporter/net/http_client.h"
#include "exporter/net/timestamping.h"
#include "exporter/probes/peer_probe.h"
#include "exporter/wire/echo.h"

namespace podnet::probes::service {

Attribution Attribute(const topology::Self& self, bool identified, std::string_view node,
                      std::string_view zone) {
  if (!identified) return {};
  return {std::string(zone), topology::Classify(self, node, zone)};
}

namespace {

namespace echo = wire::echo;
using Clock = std::chrono::steady_clock;

// Distinct backend_zone values one target may hold at a time: zones are few; a responder that
// names a new zone in every answer must not grow the series without bound.
constexpr std::size_t kMaxBackendZones = 32;
// A zone slot is freed, with its series, after this many answered rounds (rounds with at least
// one good answer, so that an outage of the Service frees nothing) without an answer from it:
// otherwise a burst of made-up zones would hold the 32 slots for good, and a real new zone would
// count only as too_many_zones. 30 rounds: 5 minutes at the default 10 s interval, the window of
// the recording rules' rate(...[5m]), so a freed zone had left every rate already; and a zone
// that gets 2 % of a target's requests (count 30) goes 30 rounds without an answer with
// probability (0.98^30)^30 ≈ 1e-8: a real zone is not freed by chance.
constexpr std::uint64_t kZoneQuietRounds = 30;

// Declared in `r` each time the kind is made (prometheus-cpp merges a re-declaration).
struct ServiceFamilies {
  metrics::Metrics& r;
  metrics::CounterFamily& requests =
      metrics::DeclareCounter(r, "podnet_service_requests_total",
                              "Requests to a Service answered, by the answering backend's zone and "
                              "the path class from this Pod to it (unknown: the answer did not say "
                              "who answered).");
  metrics::HistogramFamily rtt = metrics::DeclareHistogram(
      r, "podnet_service_rtt_seconds",
      "Round-trip time of answered requests to a Service, seconds (UDP: kernel "
      "TX to RX timestamps; HTTP: request written to first response byte on "
      "a new connection).",
      metrics::LatencyBuckets());
  metrics::CounterFamily& errors =
      metrics::DeclareCounter(r, "podnet_service_request_errors_total",
                              "Requests to a Service without a good answer, by reason.");
  metrics::CounterFamily& zones_expired =
      metrics::DeclareCounter(r, "podnet_service_backend_zones_expired_total",
                              "backend_zone values of a target whose series were removed (their "
                              "slot of 32 freed) after 30 answered rounds without an answer "
                              "from that zone.");
};

// One request's outcome.
struct Outcome {
  std::string failure;  // the error reason; empty when answered
  double rtt_seconds = 0;
  bool identified = false;  // the answer named its responder
  std::string node;
  std::string zone;
  // For podnet_probe_{sent,received}_bytes_total: UDP datagrams with their IP and UDP headers;
  // HTTP the TCP payload (as the HTTP probe counts it).
  std::size_t sent_bytes = 0;
  std::size_t received_bytes = 0;
};
using OutcomeFn = std::function<void(Outcome)>;

Outcome Failed(std::string reason) {
  Outcome o;
  o.failure = std::move(reason);
  return o;
}

// A target as the scheduler names it: by its key, the target's name.
topology::Peer TargetPeer(const std::string& name) {
  topology::Peer p;
  p.name = name;
  return p;
}

const char* SocketErrorReason(int err) {
  switch (err) {
    case ECONNREFUSED:
      return "refused";
    case EHOSTUNREACH:
    case ENETUNREACH:
      return "unreachable";
    default:
      return "send_failed";
  }
}

// One UDP echo request on a socket of its own (a new ephemeral source port: a new flow for
// conntrack), connected to the Service address, so that only the Service's answer (un-NATed by
// conntrack) and ICMP errors (ECONNREFUSED) reach it.
class UdpRequest : public std::enable_shared_from_this<UdpRequest> {
 public:
  UdpRequest(boost::asio::io_context& io, boost::asio::ip::udp::endpoint to, std::uint16_t seq,
             std::uint64_t token)
      : io_(io), socket_(io), timer_(io), to_(to), seq_(seq), token_(token) {}

  void Start(Clock::time_point deadline, OutcomeFn done) {
    done_ = std::move(done);
    boost::system::error_code ec;
    socket_.open(to_.protocol(), ec);
    if (ec) return FinishLater("socket");
    net::EnableTimestamping(socket_.native_handle());
    socket_.non_blocking(true, ec);
    socket_.connect(to_, ec);
    if (ec) return FinishLater(SocketErrorReason(ec.value()));
    std::vector<std::uint8_t> payload =
        echo::EncodePayload({echo::Kind::kRequest, seq_, token_}, echo::kIdentityPayloadSize);
    echo::AskIdentity(payload);
    user_tx_ns_ = net::RealtimeNs();
    if (::send(socket_.native_handle(), payload.data(), payload.size(), 0) < 0) {
      return FinishLater(SocketErrorReason(errno));
    }
    sent_bytes_ = payload.size() + HeaderBytes();
    timer_.expires_at(deadline);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->Finish(Failed("timeout"));
    });
    Wait();
  }

  // Ends the request without reporting it (the round was cancelled).
  void Cancel() {
    done_ = nullptr;
    Close();
  }

 private:
  void Wait() {
    socket_.async_wait(boost::asio::ip::udp::socket::wait_read,
                       [self = shared_from_this()](boost::system::error_code ec) {
                         if (!ec) self->OnReadable();
                       });
  }

  void OnReadable() {
    if (!done_) return;
    int fd = socket_.native_handle();
    // The first TX stamp is the request's (one datagram per socket); reading it also empties
    // the error queue, whose entries wake the socket as readable.
    while (auto stamp = net::ReadTxStamp(fd)) {
      if (tx_ns_ == 0) tx_ns_ = stamp->ns;
    }
    net::Datagram dg;
    if (!net::ReceiveDatagram(fd, buffer_, &dg)) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Wait();
      return Finish(Failed(SocketErrorReason(errno)));
    }
    received_bytes_ = dg.size + HeaderBytes();
    std::span<const std::uint8_t> data(buffer_.data(), dg.size);
    auto h = echo::DecodePayload(data);
    if (!h || h->kind != echo::Kind::kReply || h->seq != seq_ || h->token != token_) {
      return Finish(Failed("bad_response"));
    }
    Outcome o;
    echo::Identity id;
    switch (echo::ReadIdentity(data, &id)) {
      case echo::IdentityRead::kMalformed:
        return Finish(Failed("bad_response"));
      case echo::IdentityRead::kPresent:
        o.identified = true;
        o.node = std::move(id.node);
        o.zone = std::move(id.zone);
        break;
      case echo::IdentityRead::kAbsent:
        break;
    }
    std::int64_t tx = tx_ns_ != 0 ? tx_ns_ : user_tx_ns_;
    o.rtt_seconds = static_cast<double>(std::max<std::int64_t>(0, dg.rx_ns - tx)) * 1e-9;
    Finish(std::move(o));
  }

  void FinishLater(const char* reason) {
    boost::asio::post(io_, [self = shared_from_this(), reason] { self->Finish(Failed(reason)); });
  }

  // IP (20 or 40 bytes) and UDP (8) headers.
  std::size_t HeaderBytes() const { return (to_.address().is_v6() ? 40 : 20) + 8; }

  void Finish(Outcome o) {
    o.sent_bytes = sent_bytes_;
    o.received_bytes = received_bytes_;
    Close();
    if (auto done = std::move(done_)) {
      done_ = nullptr;
      done(std::move(o));
    }
  }

  void Close() {
    boost::system::error_code ec;
    timer_.cancel();
    socket_.close(ec);
  }

  boost::asio::io_context& io_;
  boost::asio::ip::udp::socket socket_;
  boost::asio::steady_timer timer_;
  boost::asio::ip::udp::endpoint to_;
  std::uint16_t seq_;
  std::uint64_t token_;
  OutcomeFn done_;
  std::int64_t user_tx_ns_ = 0;
  std::int64_t tx_ns_ = 0;  // kernel TX stamp; 0 until read
  std::size_t sent_bytes_ = 0;
  std::size_t received_bytes_ = 0;
  // A reply is as large as its request; a larger datagram is read truncated and then refused
  // by its token or identity checks.
  std::array<std::uint8_t, 2048> buffer_{};
};

// One GET /echo on a new connection ("Connection: close"), with the HTTP probe's client.
// Returns the connection (Close ends it: `done` then gets the error, or nothing after Cancel).
std::shared_ptr<net::http_client::HttpConnection> HttpRequest(boost::asio::io_context& io,
                                                              boost::asio::ip::tcp::endpoint to,
                                                              const std::string& host,
                                                              Clock::time_point deadline,
                                                              OutcomeFn done) {
  auto conn = std::make_shared<net::http_client::HttpConnection>(io, to, host, "/echo", 65536);
  conn->Connect(deadline, [conn, deadline, done = std::move(done)](net::http_client::Failure f,
                                                                   Clock::time_point) mutable {
    if (f != net::http_client::Failure::kNone)
      return done(Failed(net::http_client::FailureReason(f)));
    conn->Request(false, deadline, [done = std::move(done)](const net::http_client::Exchange& ex) {
      Outcome o;
      o.sent_bytes = ex.bytes_sent;
      o.received_bytes = ex.bytes_received;
      if (ex.failure != net::http_client::Failure::kNone) {
        o.failure = net::http_client::FailureReason(ex.failure);
        return done(std::move(o));
      }
      o.rtt_seconds = std::chrono::duration<double>(ex.first_byte - ex.sent).count();
      o.identified = ex.node.has_value();
      o.node = ex.node.value_or("");
      o.zone = ex.zone.value_or("");
      if (o.identified && (!echo::ValidIdentityName(o.node) || !echo::ValidIdentityName(o.zone))) {
        o.failure = "bad_response";
      }
      done(std::move(o));
    });
  });
  return conn;
}

class ServiceKind;

// One target: `count` requests a round, each a flow of its own.
class TargetProbe : public PeerProbeBase {
 public:
  TargetProbe(std::shared_ptr<ServiceKind> kind, ServiceTarget target);

 private:
  void StartRound(Clock::time_point scheduled) override;
  void StopRound() override;
  void Resolved(const boost::system::error_code& ec,
                const boost::asio::ip::tcp::resolver::results_type& results);
  void SendAt(Clock::time_point start);
  void Send();
  void Record(const Outcome& o);
  void ExpireQuietZones();
  void MaybeEnd() {
    if (sent_ == options().count && inflight_.empty()) EndRound();
  }
  const ServiceOptions& options() const;

  std::shared_ptr<ServiceKind> kind_;
  ServiceTarget target_;
  boost::asio::steady_timer timer_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::ip::address address_;  // this round's
  Clock::time_point start_;           // this round's first request
  int sent_ = 0;
  int next_id_ = 0;
  std::map<int, std::function<void()>> inflight_;  // request id → its cancel
  // One slot per backend_zone value that has series (at most kMaxBackendZones).
  struct ZoneSlot {
    std::uint64_t last_round = 0;  // answered_rounds_ when it last answered
    std::set<const void*>
        requests;  // its podnet_service_requests_total series (one per path class)
  };
  std::map<std::string, ZoneSlot> zones_;
  std::uint64_t answered_rounds_ = 0;  // finished rounds that got at least one good answer
  bool answered_ = false;              // this round got one
};

class ServiceKind : public ProbeKind, public std::enable_shared_from_this<ServiceKind> {
 public:
  ServiceKind(const ServiceOptions& o, ProbeEnv& env)
      : options_(o), env_(env), families_{env.metrics}, rng_(std::random_device{}()) {}

  std::string_view name() const override { return "service"; }
  config::Duration interval() const override { return options_.interval; }
  std::shared_ptr<PeerProbe> ForPeer(const topology::Peer&) override { return nullptr; }

  std::vector<std::string> Targets() const override {
    std::vector<std::string> keys;
    for (const auto& t : options_.targets) keys.push_back(t.name);
    return keys;
  }

  std::shared_ptr<PeerProbe> ForTarget(const std::string& key) override {
    for (const auto& t : options_.targets) {
      if (t.name == key) return std::make_shared<TargetProbe>(shared_from_this(), t);
    }
    return nullptr;
  }

  const ServiceOptions& options() const { return options_; }
  ProbeEnv& env() { return env_; }
  ServiceFamilies& families() { return families_; }
  std::uint64_t Token() { return rng_(); }

 private:
  ServiceOptions options_;
  ProbeEnv& env_;
  ServiceFamilies families_;
  std::mt19937_64 rng_;
};

TargetProbe::TargetProbe(std::shared_ptr<ServiceKind> kind, ServiceTarget target)
    : PeerProbeBase(kind->env(), "service", TargetPeer(target.name),
                    {{"service", target.name},
                     {"source_node", kind->env().self.node},
                     {"source_zone", kind->env().self.zone}}),
      kind_(std::move(kind)),
      target_(std::move(target)),
      timer_(env().io),
      resolver_(env().io) {}

const ServiceOptions& TargetProbe::options() const { return kind_->options(); }

void TargetProbe::StartRound(Clock::time_point scheduled) {
  sent_ = 0;
  if (std::exchange(answered_, false)) {
    ++answered_rounds_;
    ExpireQuietZones();
  }
  if (auto ip = net::ParseIp(target_.address)) {
    address_ = *ip;
    SendAt(scheduled);
    return;
  }
  // getaddrinfo, as the Pod's applications resolve the Service name (asio runs it on a thread
  // of its own); bounded by timeout.
  resolver_.async_resolve(target_.address, std::to_string(target_.port),
                          IfCurrent(this, [](auto& self, const boost::system::error_code& ec,
                                             boost::asio::ip::tcp::resolver::results_type results) {
                            self.Resolved(ec, results);
                          }));
  timer_.expires_at(scheduled + options().timeout);
  timer_.async_wait(IfCurrent(this, [](auto& self, boost::system::error_code ec) {
    if (!ec) self.resolver_.cancel();
  }));
}

void TargetProbe::Resolved(const boost::system::error_code& ec,
                           const boost::asio::ip::tcp::resolver::results_type& results) {
  timer_.cancel();
  if (ec || results.empty()) {
    // Nothing was sent this round: one error, not `count`.
    AddSeries(kind_->families().errors, {{"reason", "resolve"}}).Increment();
    spdlog::debug("service {}: cannot resolve {}: {}", target_.name, target_.address,
                  ec ? ec.message() : "no address");
    sent_ = options().count;
    MaybeEnd();
    return;
  }
  address_ = results.begin()->endpoint().address();
  SendAt(Clock::now());
}

void TargetProbe::SendAt(Clock::time_point start) {
  start_ = start;
  Send();
}

// Request i goes at start_ + i*spacing (open loop: a late wake-up does not shift the rest).
void TargetProbe::Send() {
  if (sent_ >= options().count) return MaybeEnd();
  auto at = start_ + sent_ * options().spacing;
  if (Clock::now() < at) {
    timer_.expires_at(at);
    timer_.async_wait(IfCurrent(this, [](auto& self, boost::system::error_code ec) {
      if (!ec) self.Send();
    }));
    return;
  }
  int id = next_id_++;
  auto seq = static_cast<std::uint16_t>(sent_);
  ++sent_;
  auto deadline = Clock::now() + options().timeout;
  auto done = IfCurrent(this, [id](auto& self, Outcome o) {
    self.inflight_.erase(id);
    if (self.series()) self.Record(o);
    self.MaybeEnd();
  });
  auto& io = env().io;
  if (target_.protocol == ServiceProtocol::kUdp) {
    auto req = std::make_shared<UdpRequest>(
        io, boost::asio::ip::udp::endpoint(address_, target_.port), seq, kind_->Token());
    inflight_[id] = [req] { req->Cancel(); };
    req->Start(deadline, std::move(done));
  } else {
    // Host: the address as configured (a Service name, or the VIP).
    std::string host = net::ParseIp(target_.address)
                           ? net::FormatHostPort(address_, target_.port)
                           : target_.address + ":" + std::to_string(target_.port);
    auto conn = HttpRequest(io, {address_, target_.port}, host, deadline, std::move(done));
    inflight_[id] = [conn] { conn->Close(); };
  }
  Send();
}

void TargetProbe::Record(const Outcome& o) {
  auto& f = kind_->families();
  AddSeries(env().metrics.probe_sent_bytes(), {{"probe", "service"}})
      .Increment(static_cast<double>(o.sent_bytes));
  AddSeries(env().metrics.probe_received_bytes(), {{"probe", "service"}})
      .Increment(static_cast<double>(o.received_bytes));
  if (!o.failure.empty()) {
    AddSeries(f.errors, {{"reason", o.failure}}).Increment();
    spdlog::debug("service {}: request failed reason={}", target_.name, o.failure);
    return;
  }
  answered_ = true;
  Attribution a = Attribute(env().self, o.identified, o.node, o.zone);
  auto slot = zones_.find(a.backend_zone);
  if (slot == zones_.end()) {
    if (zones_.size() >= kMaxBackendZones) {
      AddSeries(f.errors, {{"reason", "too_many_zones"}}).Increment();
      return;
    }
    slot = zones_.emplace(a.backend_zone, ZoneSlot{}).first;
  }
  slot->second.last_round = answered_rounds_;
  std::string path(topology::PathClassName(a.path));
  auto& requests = AddSeries(f.requests, {{"backend_zone", a.backend_zone}, {"path_class", path}});
  requests.Increment();
  slot->second.requests.insert(&requests);
  AddSeries(f.rtt, {{"path_class", path}}).Observe(o.rtt_seconds);
}

// At the start of a round that follows an answered one: frees the slots of zones that did not
// answer in the last kZoneQuietRounds answered rounds, and their request series (the RTT
// histograms are by path class only: they stay).
void TargetProbe::ExpireQuietZones() {
  if (!series()) return;
  for (auto it = zones_.begin(); it != zones_.end();) {
    // Answered rounds since the one this zone last answered in.
    if (answered_rounds_ - 1 - it->second.last_round < kZoneQuietRounds) {
      ++it;
      continue;
    }
    for (const void* s : it->second.requests) series()->Remove(s);
    AddSeries(kind_->families().zones_expired, {}).Increment();
    spdlog::debug(
        "service {}: backend_zone \"{}\" freed after {} answered rounds without an answer",
        target_.name, it->first, kZoneQuietRounds);
    it = zones_.erase(it);
  }
}

void TargetProbe::StopRound() {
  timer_.cancel();
  resolver_.cancel();
  auto inflight = std::move(inflight_);
  inflight_.clear();
  for (auto& [id, cancel] : inflight) cancel();
}

}  // namespace

std::shared_ptr<ProbeKind> MakeServiceKind(const ServiceOptions& options, ProbeEnv& env) {
  return std::make_shared<ServiceKind>(options, env);
}

// Per target, for each (backend zone, path class) it answered from — one here, a Service with
// backends in Z zones has Z — a latency histogram and a requests counter, and the target's own
// byte counters.
std::size_t CountSeries(const config::Config& c, SeriesCounter& n) {
  const auto& targets = c.service->targets;
  n.AddHistograms("podnet_service_rtt_seconds", targets.size(), metrics::LatencyBuckets());
  n.Add("podnet_service_requests_total", targets.size());
  return targets.size();
}

}  // namespace podnet::probes::service
