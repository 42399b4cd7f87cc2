#include "exporter/probes/rtt/rtt_probe.h"

#include <linux/icmp.h>
#include <linux/net_tstamp.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <optional>
#include <random>
#include <tuple>

#include "exporter/metrics/buckets.h"
#include "exporter/metrics/families.h"
#include "exporter/net/timestamping.h"
#include "exporter/probes/peer_probe.h"
#include "exporter/probes/phase_grid.h"
#include "exporter/probes/rtt/train.h"
#include "exporter/wire/echo.h"

namespace podnet::probes::rtt {

namespace echo = wire::echo;
namespace {

using boost::asio::ip::address;

// How a family's echo socket was opened.
enum class SocketMode { kIcmpDatagram, kIcmpRaw, kUdp };

const char* ModeName(SocketMode m) {
  switch (m) {
    case SocketMode::kIcmpDatagram:
      return "ICMP datagram (ping_group_range)";
    case SocketMode::kIcmpRaw:
      return "ICMP raw";
    case SocketMode::kUdp:
      return "UDP";
  }
  return "?";
}

// Bytes on the wire above the payload: IP header + ICMP/UDP header (both 8 bytes).
std::size_t HeaderBytes(bool v6) { return (v6 ? 40 : 20) + 8; }

// One socket per address family. Owns the fd; reports replies and TX stamps to its kind.
class EchoSocket {
 public:
  EchoSocket(boost::asio::io_context& io, int fd, SocketMode mode, bool v6)
      : descriptor_(io, fd), mode_(mode), v6_(v6) {
    ts_mode_ = net::EnableTimestamping(fd);
  }
  ~EchoSocket() { descriptor_.close(); }

  int fd() { return descriptor_.native_handle(); }
  SocketMode mode() const { return mode_; }
  bool v6() const { return v6_; }
  boost::asio::posix::stream_descriptor& descriptor() { return descriptor_; }
  const net::TimestampingMode& ts_mode() const { return ts_mode_; }

  // OPT_ID keys: the kernel numbers each datagram sent since timestamping was (re)armed. A send
  // that fails may or may not have consumed a key, so after a failure the counter is re-armed
  // (turning OPT_ID off and on resets it to 0) rather than guessed. When the kernel refuses to
  // turn it off, the counter goes on from a number nobody knows: RearmTxKeys then gives up
  // kernel TX stamps on this socket (user-space ones from then on) and returns false, errno set.
  std::uint32_t next_tskey = 0;
  struct KeyedSeq {
    std::uint32_t key = 0;
    std::uint16_t seq = 0;
    bool valid = false;
  };
  std::array<KeyedSeq, 4096> tskey_ring{};

  bool RearmTxKeys() {
    while (net::ReadTxStamp(fd())) {
    }
    next_tskey = 0;
    tskey_ring.fill(KeyedSeq{});  // a stamp still to come matches no request
    unsigned flags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_TX_SOFTWARE |
                     SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_TSONLY;
    if (setsockopt(fd(), SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) != 0) {
      ts_mode_.tx_kernel = false;  // RX stamps are as they were: only OPT_ID is in doubt
      return false;
    }
    ts_mode_ = net::EnableTimestamping(fd());
    return true;
  }

 private:
  boost::asio::posix::stream_descriptor descriptor_;
  SocketMode mode_;
  bool v6_;
  net::TimestampingMode ts_mode_;
};

class RttPeerProbe;

// Declared in `r` each time the kind is made (prometheus-cpp merges a re-declaration).
struct RttFamilies {
  metrics::Metrics& r;
  metrics::HistogramFamily rtt = metrics::DeclareHistogram(
      r, "podnet_rtt_seconds",
      "Round-trip time of echo requests answered in time, from kernel TX to "
      "kernel RX timestamps.",
      metrics::LatencyBuckets());
  metrics::CounterFamily& sent =
      metrics::DeclareCounter(r, "podnet_rtt_packets_sent_total",
                              "Echo requests sent, counted when their train settles (send failures "
                              "included: they are lost).");
  metrics::CounterFamily& received = metrics::DeclareCounter(
      r, "podnet_rtt_packets_received_total", "Echo requests answered within the timeout.");
  metrics::CounterFamily& duplicates =
      metrics::DeclareCounter(r, "podnet_rtt_duplicate_replies_total",
                              "Extra replies to an echo request already answered.");
  metrics::CounterFamily& reordered =
      metrics::DeclareCounter(r, "podnet_rtt_reordered_replies_total",
                              "Replies that arrived after the reply to a later request of the "
                              "same train.");
  metrics::CounterFamily& late =
      metrics::DeclareCounter(r, "podnet_rtt_late_replies_total",
                              "Replies that arrived after the timeout (counted as lost).");
  // Exact figures of the round's own samples: a +20 µs step at ~905 µs stays inside one
  // histogram bucket (800-1,000 µs), while the median of every round moves by the step.
  metrics::GaugeFamily& round_min = metrics::DeclareGauge(
      r, "podnet_rtt_round_min_seconds",
      "Smallest round-trip time of the last train's replies answered in time; absent after a "
      "train without one.");
  metrics::GaugeFamily& round_median = metrics::DeclareGauge(
      r, "podnet_rtt_round_median_seconds",
      "Median round-trip time of the last train's replies answered in time (even count: mean "
      "of the two middle values); absent after a train without one.");
  metrics::CounterFamily& stamps =
      metrics::DeclareCounter(r, "podnet_rtt_timestamps_total",
                              "Where the times of measured RTTs came from: the kernel "
                              "(SO_TIMESTAMPING) or user space next to the system call.");
  prometheus::Counter& tx_kernel = stamps.Add({{"direction", "tx"}, {"source", "kernel"}});
  prometheus::Counter& tx_user = stamps.Add({{"direction", "tx"}, {"source", "user"}});
  prometheus::Counter& rx_kernel = stamps.Add({{"direction", "rx"}, {"source", "kernel"}});
  prometheus::Counter& rx_user = stamps.Add({{"direction", "rx"}, {"source", "user"}});
};

class RttKind : public ProbeKind, public std::enable_shared_from_this<RttKind> {
 public:
  RttKind(const RttOptions& options, ProbeEnv& env)
      : options_(options), env_(env), families_{env.metrics}, rng_(std::random_device{}()) {
    ident_ = static_cast<std::uint16_t>(rng_());
  }

  std::string_view name() const override { return "rtt"; }
  config::Duration interval() const override { return options_.interval; }
  std::shared_ptr<PeerProbe> ForPeer(const topology::Peer& peer) override;

  const RttOptions& options() const { return options_; }
  ProbeEnv& env() { return env_; }
  RttFamilies& families() { return families_; }
  const char* protocol() const { return RttProtocolName(options_.protocol); }

  struct SendOutcome {
    bool sent = false;
    std::size_t wire_bytes = 0;
    std::string error;  // reason label when !sent
    // Kernel TX stamps given up after this failed send (EchoSocket::RearmTxKeys): why, else "".
    std::string tx_stamps_lost;
  };

  // Sends request `index` of train `gen` of `probe`. Records the slot for reply matching.
  SendOutcome Send(const std::shared_ptr<RttPeerProbe>& probe, std::uint64_t gen, int index,
                   Train& train);

 private:
  struct Slot {
    std::weak_ptr<RttPeerProbe> probe;
    std::uint64_t gen = 0;
    int index = 0;
    std::uint64_t token = 0;
  };

  EchoSocket* SocketFor(bool v6);
  std::unique_ptr<EchoSocket> Open(bool v6);
  void ReadLoop(EchoSocket* s);
  void DrainReplies(EchoSocket& s);
  void DrainTxStamps(EchoSocket& s, int max);

  RttOptions options_;
  ProbeEnv& env_;
  RttFamilies families_;
  std::mt19937_64 rng_;
  std::uint16_t ident_ = 0;
  std::uint16_t next_seq_ = 0;
  std::array<Slot, 65536> slots_{};
  std::unique_ptr<EchoSocket> sockets_[2];  // [0] IPv4, [1] IPv6
  bool open_failed_[2] = {false, false};
  std::vector<std::uint8_t> rx_buffer_ = std::vector<std::uint8_t>(65536);
  std::vector<std::uint8_t> tx_buffer_;  // the request being sent; its capacity is reused
};

class RttPeerProbe : public PeerProbeBase {
 public:
  RttPeerProbe(std::shared_ptr<RttKind> kind, const topology::Peer& peer)
      : PeerProbeBase(kind->env(), "rtt", peer), kind_(std::move(kind)), timer_(env().io) {
    auto& f = kind_->families();
    m_.rtt = AddSeries(f.rtt, protocol_);
    m_.sent = &AddSeries(f.sent, protocol_);
    m_.received = &AddSeries(f.received, protocol_);
    m_.duplicates = &AddSeries(f.duplicates, protocol_);
    m_.reordered = &AddSeries(f.reordered, protocol_);
    m_.late = &AddSeries(f.late, protocol_);
    // The round gauges appear with the first round that has an RTT (SetRoundStats).
    std::tie(m_.sent_bytes, m_.received_bytes) = AddByteCounters();
  }

  // A reply matched to train `gen`, request `index`.
  void OnReply(std::uint64_t gen, int index, const address& from, std::int64_t rx_ns,
               std::size_t wire_bytes) {
    if (gen != generation() || !train_ || from != peer().address) return;
    m_.received_bytes->Increment(static_cast<double>(wire_bytes));
    switch (train_->OnReply(index, rx_ns)) {
      case Train::Reply::kDuplicate:
        m_.duplicates->Increment();
        return;
      case Train::Reply::kLate:
        m_.late->Increment();
        return;
      case Train::Reply::kNotSent:
        return;
      case Train::Reply::kReordered:
        m_.reordered->Increment();
        break;
      case Train::Reply::kFirst:
        break;
    }
    // The train's last reply: settle it now rather than at its timeout. Nothing can change the
    // result any more (a further copy is a duplicate, counted after Close too), and the round's
    // timer then costs no wake-up of the loop.
    if (next_index_ >= train_->count() && train_->complete()) {
      timer_.cancel();
      Finish();
    }
  }

  void OnTxStamp(std::uint64_t gen, int index, std::int64_t ns) {
    if (gen == generation() && train_) train_->OnTxTimestamp(index, ns);
  }

 private:
  void StartRound(std::chrono::steady_clock::time_point scheduled) override {
    if (train_) {
      train_->Reset(kind_->options().count);  // no allocation per round
    } else {
      train_ = std::make_unique<Train>(kind_->options().count);
    }
    start_ = scheduled;
    next_index_ = 0;
    SendNext();
  }

  void StopRound() override { timer_.cancel(); }

  void SendNext() {
    int index = next_index_++;
    auto outcome = kind_->Send(SharedSelf<RttPeerProbe>(), generation(), index, *train_);
    if (outcome.sent) {
      m_.sent_bytes->Increment(static_cast<double>(outcome.wire_bytes));
    } else {
      CountError(outcome.error);
      if (!outcome.tx_stamps_lost.empty()) CountError("tx_timestamping", outcome.tx_stamps_lost);
    }
    if (next_index_ < train_->count()) {
      timer_.expires_at(start_ + kind_->options().spacing * next_index_);
    } else {
      timer_.expires_at(Deadline());
    }
    timer_.async_wait(IfCurrent(this, [](auto& self, boost::system::error_code ec) {
      // A train settled by its last reply may find this wait already completed: closed() keeps
      // it from settling twice.
      if (ec || self.train_->closed()) return;
      if (self.next_index_ < self.train_->count()) {
        self.SendNext();
      } else {
        self.Finish();
      }
    }));
  }

  // When an unanswered request is lost: `timeout` after the last send (RttOptions), rounded up
  // to the phase grid counted from the round's start (itself on the grid), so that the timeouts
  // of rounds due together expire together and with later rounds' starts: one wake-up of the
  // loop for all of them. Never earlier than `timeout` after the send, at most one grid step
  // later.
  std::chrono::steady_clock::time_point Deadline() const {
    const auto& o = kind_->options();
    auto last_send =
        std::max(start_ + o.spacing * (train_->count() - 1), std::chrono::steady_clock::now());
    auto until = last_send + o.timeout - start_;
    auto steps = (until + kPhaseGrid - std::chrono::nanoseconds(1)) / kPhaseGrid;
    return start_ + kPhaseGrid * steps;
  }

  void Finish() {
    const TrainResult& r = train_->Close();
    // Sent and received move together when the train settles, so that sent − received is the
    // loss at every scrape (counting sends as they happen shows a train in flight as lost).
    m_.sent->Increment(r.sent);
    if (r.received > 0) m_.received->Increment(r.received);
    for (double s : r.rtt_seconds) m_.rtt.Observe(s);
    auto& f = kind_->families();
    int user_stamped = static_cast<int>(r.rtt_seconds.size()) - r.tx_kernel_stamped;
    if (r.tx_kernel_stamped > 0) f.tx_kernel.Increment(r.tx_kernel_stamped);
    if (user_stamped > 0) f.tx_user.Increment(user_stamped);
    SetRoundStats(r.stats);
    EndRound();
  }

  // The round gauges hold the last round's figures. A round without an RTT removes them rather
  // than leave the previous round's value standing (or write NaN, which would turn every
  // avg_over_time over the window into NaN): Prometheus marks the series stale at its next
  // scrape, and *_over_time functions use only the rounds that measured. The next round with
  // an RTT adds them again. Under aggregate_peers the series is shared: it stays while another
  // peer of the group feeds it (SeriesSet::Remove), last writer wins.
  void SetRoundStats(const std::optional<RoundStats>& stats) {
    if (!stats) {
      if (m_.round_min != nullptr) {
        series()->Remove(m_.round_min);
        series()->Remove(m_.round_median);
        m_.round_min = m_.round_median = nullptr;
      }
      return;
    }
    if (m_.round_min == nullptr) {
      auto& f = kind_->families();
      m_.round_min = &AddSeries(f.round_min, protocol_);
      m_.round_median = &AddSeries(f.round_median, protocol_);
    }
    m_.round_min->Set(stats->min_seconds);
    m_.round_median->Set(stats->median_seconds);
  }

  struct Series {
    metrics::HistogramSeries rtt;
    prometheus::Counter* sent;
    prometheus::Counter* received;
    prometheus::Counter* duplicates;
    prometheus::Counter* reordered;
    prometheus::Counter* late;
    prometheus::Counter* sent_bytes;
    prometheus::Counter* received_bytes;
    prometheus::Gauge* round_min;  // null while the last round had no RTT
    prometheus::Gauge* round_median;
  };

  std::shared_ptr<RttKind> kind_;
  prometheus::Labels protocol_{{"protocol", kind_->protocol()}};
  boost::asio::steady_timer timer_;
  Series m_{};  // series()'s, added once: no use after RemoveSeries (no handler is current)
  std::unique_ptr<Train> train_;  // the current train; kept after Close to count late replies
  std::chrono::steady_clock::time_point start_;
  int next_index_ = 0;
};

std::shared_ptr<PeerProbe> RttKind::ForPeer(const topology::Peer& peer) {
  return std::make_shared<RttPeerProbe>(shared_from_this(), peer);
}

std::unique_ptr<EchoSocket> RttKind::Open(bool v6) {
  int family = v6 ? AF_INET6 : AF_INET;
  auto& io = env_.io;
  auto finish = [&](int fd, SocketMode mode) {
    int rcvbuf = 1 << 20;  // a train reply burst from many peers must not overflow
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    auto s = std::make_unique<EchoSocket>(io, fd, mode, v6);
    spdlog::info("rtt: opened {} socket for IPv{} (kernel RX stamps: {}, TX stamps: {})",
                 ModeName(mode), v6 ? 6 : 4, s->ts_mode().rx_kernel ? "yes" : "no",
                 s->ts_mode().tx_kernel ? "yes" : "no");
    return s;
  };
  if (options_.protocol == RttProtocol::kUdp) {
    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
    if (fd < 0) {
      spdlog::error("rtt: cannot open UDP socket: {}", std::strerror(errno));
      return nullptr;
    }
    return finish(fd, SocketMode::kUdp);
  }
  // glibc's <netinet/in.h> declares IPPROTO_ICMP and IPPROTO_ICMPV6 in two different unnamed
  // enums: a conditional between them is an enum mismatch, so each is an int first.
  int proto = v6 ? static_cast<int>(IPPROTO_ICMPV6) : static_cast<int>(IPPROTO_ICMP);
  int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, proto);
  if (fd >= 0) return finish(fd, SocketMode::kIcmpDatagram);
  int dgram_errno = errno;
  fd = socket(family, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, proto);
  if (fd < 0) {
    spdlog::error(
        "rtt: cannot open an ICMP socket for IPv{}: datagram: {} (is the group in "
        "net.ipv4.ping_group_range?), raw: {} (needs CAP_NET_RAW); use protocol: udp instead",
        v6 ? 6 : 4, std::strerror(dgram_errno), std::strerror(errno));
    return nullptr;
  }
  // A raw socket sees every ICMP message of the host: let only echo replies through.
  if (v6) {
    icmp6_filter filter;
    ICMP6_FILTER_SETBLOCKALL(&filter);
    ICMP6_FILTER_SETPASS(echo::kIcmp6EchoReply, &filter);
    setsockopt(fd, IPPROTO_ICMPV6, ICMP6_FILTER, &filter, sizeof filter);
  } else {
    icmp_filter filter{~(1u << echo::kIcmpEchoReply)};
    setsockopt(fd, SOL_RAW, ICMP_FILTER, &filter, sizeof filter);
  }
  return finish(fd, SocketMode::kIcmpRaw);
}

EchoSocket* RttKind::SocketFor(bool v6) {
  int i = v6 ? 1 : 0;
  if (!sockets_[i] && !open_failed_[i]) {
    sockets_[i] = Open(v6);
    if (sockets_[i]) {
      ReadLoop(sockets_[i].get());
    } else {
      open_failed_[i] = true;  // logged once; every round counts reason="socket"
    }
  }
  return sockets_[i].get();
}

RttKind::SendOutcome RttKind::Send(const std::shared_ptr<RttPeerProbe>& probe, std::uint64_t gen,
                                   int index, Train& train) {
  SendOutcome out;
  const topology::Peer& peer = probe->peer();
  bool v6 = peer.address.is_v6();
  EchoSocket* s = SocketFor(v6);
  if (s == nullptr) {
    train.OnSent(index, net::RealtimeNs());
    out.error = "socket";
    return out;
  }
  std::uint16_t seq = next_seq_++;
  Slot& slot = slots_[seq];
  slot.probe = probe;
  slot.gen = gen;
  slot.index = index;
  slot.token = rng_();

  echo::Header h;
  h.seq = seq;
  h.token = slot.token;
  echo::EchoKind kind = s->mode() == SocketMode::kUdp ? echo::EchoKind::kUdp
                        : v6                          ? echo::EchoKind::kIcmp6
                                                      : echo::EchoKind::kIcmp4;
  echo::EncodeRequest(kind, ident_, h, static_cast<std::size_t>(options_.size), tx_buffer_);
  // Asio's endpoint is the sockaddr_in / sockaddr_in6 the kernel takes (ICMP: port 0).
  boost::asio::ip::udp::endpoint dest(peer.address, s->mode() == SocketMode::kUdp ? peer.port : 0);
  std::int64_t tx_user = net::RealtimeNs();
  ssize_t n = sendto(s->fd(), tx_buffer_.data(), tx_buffer_.size(), 0, dest.data(), dest.size());
  train.OnSent(index, tx_user);  // a failed send is a lost request, as ping counts it
  if (n < 0) {
    out.error = "send_failed";
    SPDLOG_DEBUG("rtt: send to {} failed: {}", peer.name, std::strerror(errno));
    if (s->ts_mode().tx_kernel && !s->RearmTxKeys()) {
      out.tx_stamps_lost = std::strerror(errno);
      spdlog::warn(
          "rtt: cannot re-arm kernel TX timestamps on the IPv{} socket after a failed send: {}; "
          "its RTTs are timed from user-space TX stamps from now on",
          v6 ? 6 : 4, out.tx_stamps_lost);
    }
    return out;
  }
  out.sent = true;
  out.wire_bytes = HeaderBytes(v6) + static_cast<std::size_t>(options_.size);
  if (s->ts_mode().tx_kernel) {
    std::uint32_t key = s->next_tskey++;
    s->tskey_ring[key % s->tskey_ring.size()] = {key, seq, true};
    // Software TX stamps of veth and loopback are queued within sendmsg: read this request's
    // now, so its EPOLLERR wakes nobody. Only one: reading on to EAGAIN would cost a system
    // call per send, and a second copy (a bridge port's) wakes the read loop, which drains all.
    DrainTxStamps(*s, 1);
  }
  return out;
}

void RttKind::ReadLoop(EchoSocket* s) {
  // EPOLLERR (a queued TX stamp) also completes a read wait, so one loop serves both queues.
  s->descriptor().async_wait(boost::asio::posix::stream_descriptor::wait_read,
                             [weak = weak_from_this(), s](boost::system::error_code ec) {
                               auto self = weak.lock();
                               if (ec || !self) return;
                               self->DrainTxStamps(*s, 1024);
                               self->DrainReplies(*s);
                               self->ReadLoop(s);
                             });
}

void RttKind::DrainTxStamps(EchoSocket& s, int max) {
  for (int i = 0; i < max; ++i) {
    auto stamp = net::ReadTxStamp(s.fd());
    if (!stamp) return;
    const auto& ks = s.tskey_ring[stamp->key % s.tskey_ring.size()];
    if (!ks.valid || ks.key != stamp->key) continue;
    const Slot& slot = slots_[ks.seq];
    if (auto probe = slot.probe.lock()) probe->OnTxStamp(slot.gen, slot.index, stamp->ns);
  }
}

void RttKind::DrainReplies(EchoSocket& s) {
  // Bounded per wake-up so a flood cannot monopolise the probe loop; the wait re-fires at once
  // while data is left.
  for (int i = 0; i < 256; ++i) {
    net::Datagram d;
    if (!net::ReceiveDatagram(s.fd(), rx_buffer_, &d)) return;
    std::span<const std::uint8_t> data(rx_buffer_.data(), d.size);
    address from;
    std::uint16_t from_port = 0;
    if (d.from.ss_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&d.from);
      boost::asio::ip::address_v6::bytes_type b;
      std::memcpy(b.data(), &sin6->sin6_addr, b.size());
      from = boost::asio::ip::address_v6(b);
      from_port = ntohs(sin6->sin6_port);
    } else if (d.from.ss_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(&d.from);
      from = boost::asio::ip::address_v4(ntohl(sin->sin_addr.s_addr));
      from_port = ntohs(sin->sin_port);
    } else {
      continue;
    }
    std::span<const std::uint8_t> payload;
    if (s.mode() == SocketMode::kUdp) {
      payload = data;
    } else {
      auto reply =
          echo::ParseIcmpEchoReply(s.v6(), s.mode() == SocketMode::kIcmpRaw && !s.v6(), data);
      if (!reply) continue;
      // Raw sockets see every echo reply of the host; the kernel demultiplexes ping sockets.
      if (s.mode() == SocketMode::kIcmpRaw && reply->ident != ident_) continue;
      payload = reply->payload;
    }
    auto h = echo::DecodePayload(payload);
    if (!h ||
        h->kind != (s.mode() == SocketMode::kUdp ? echo::Kind::kReply : echo::Kind::kRequest)) {
      continue;  // ICMP echo data comes back as sent (kind = request); UDP echo flips it
    }
    const Slot& slot = slots_[h->seq];
    if (slot.token != h->token) continue;  // stale (seq reused) or forged
    auto probe = slot.probe.lock();
    if (!probe) continue;
    if (s.mode() == SocketMode::kUdp && from_port != probe->peer().port) continue;
    std::size_t wire = HeaderBytes(s.v6()) + payload.size();
    (d.rx_kernel ? families_.rx_kernel : families_.rx_user).Increment();
    probe->OnReply(slot.gen, slot.index, from, d.rx_ns, wire);
  }
}

}  // namespace

std::shared_ptr<ProbeKind> MakeRttKind(const RttOptions& options, ProbeEnv& env) {
  return std::make_shared<RttKind>(options, env);
}

// One protocol; the 5 packet counters at construction, the 2 round gauges after a round with a
// reply; timestamps {direction} x {source} without peer labels.
std::size_t CountSeries(const config::Config& c, SeriesCounter& n) {
  n.AddHistograms("podnet_rtt_seconds", n.histogram_groups(), metrics::LatencyBuckets());
  for (const char* f : {"podnet_rtt_packets_sent_total", "podnet_rtt_packets_received_total",
                        "podnet_rtt_duplicate_replies_total", "podnet_rtt_reordered_replies_total",
                        "podnet_rtt_late_replies_total", "podnet_rtt_round_min_seconds",
                        "podnet_rtt_round_median_seconds"}) {
    n.Add(f, n.peers());
  }
  n.Add("podnet_rtt_timestamps_total", 4);
  return n.groups();
}

}  // namespace podnet::probes::rtt
