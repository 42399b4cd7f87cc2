#include "exporter/probes/mtu/mtu_probe.h"

#include <ifaddrs.h>
#include <linux/errqueue.h>
#include <net/if.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "exporter/metrics/families.h"
#include "exporter/net/address.h"
#include "exporter/probes/mtu/search.h"
#include "exporter/probes/peer_probe.h"
#include "exporter/wire/echo.h"

namespace podnet::probes::mtu {

namespace echo = wire::echo;

int InterfaceMtu(int fd, bool v6) {
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) == 0) {
      int mtu = 0;
      for (ifaddrs* i = list; i != nullptr && mtu == 0; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != local.ss_family) continue;
        bool same = v6 ? std::memcmp(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                                     &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr,
                                     sizeof(in6_addr)) == 0
                       : reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr ==
                             reinterpret_cast<sockaddr_in*>(&local)->sin_addr.s_addr;
        if (!same) continue;
        ifreq ifr{};
        std::strncpy(ifr.ifr_name, i->ifa_name, IFNAMSIZ - 1);
        if (ioctl(fd, SIOCGIFMTU, &ifr) == 0) mtu = ifr.ifr_mtu;
      }
      freeifaddrs(list);
      if (mtu > 0) return mtu;
    }
  }
  int mtu = 0;
  len = sizeof mtu;
  if (getsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_MTU : IP_MTU, &mtu, &len) != 0) {
    return 0;
  }
  return mtu;
}

namespace {

using Clock = std::chrono::steady_clock;

// Bytes of an IP packet above its UDP payload: IP header + UDP header.
int HeaderBytes(bool v6) { return (v6 ? 40 : 20) + 8; }

// The smallest MTU of the protocol, the search's floor below min_size: IPv4 68 (RFC 791: every
// router forwards 68 bytes unfragmented; a request of 68 holds the 24-byte record), IPv6 1280
// (RFC 8200 §5).
int FloorBytes(bool v6) { return v6 ? 1280 : 68; }

// Declared in `r` each time the kind is made (prometheus-cpp merges a re-declaration).
struct MtuFamilies {
  metrics::Metrics& r;
  metrics::GaugeFamily& path = metrics::DeclareGauge(
      r, "podnet_path_mtu_bytes",
      "Largest IP packet (bytes, IP and UDP headers included) that crossed the path to the peer "
      "in this direction in the last path-MTU round; 0 when not even the smallest size did. "
      "Reverse is asked only up to the forward figure: equal to it means at least that.");
  metrics::GaugeFamily& icmp = metrics::DeclareGauge(
      r, "podnet_path_mtu_icmp_bytes",
      "MTU named by the last ICMP fragmentation-needed / packet-too-big error for a datagram to "
      "the peer (forward direction).");
  metrics::GaugeFamily& black_hole = metrics::DeclareGauge(
      r, "podnet_path_mtu_black_hole",
      "1 when sizes above podnet_path_mtu_bytes were lost with no ICMP error while smaller ones "
      "crossed in the last round, else 0.");
  metrics::GaugeFamily& interface = metrics::DeclareGauge(
      r, "podnet_path_mtu_interface_bytes",
      "MTU of the interface this Pod sends to the peer through, as the kernel sees it.");
};

class MtuKind : public ProbeKind, public std::enable_shared_from_this<MtuKind> {
 public:
  MtuKind(const MtuOptions& options, ProbeEnv& env)
      : options_(options), env_(env), families_{env.metrics} {}
  std::string_view name() const override { return "mtu"; }
  config::Duration interval() const override { return options_.interval; }
  std::shared_ptr<PeerProbe> ForPeer(const topology::Peer& peer) override;
  const MtuOptions& options() const { return options_; }
  ProbeEnv& env() { return env_; }
  MtuFamilies& families() { return families_; }

 private:
  MtuOptions options_;
  ProbeEnv& env_;
  MtuFamilies families_;
};

enum class Direction { kForward, kReverse };

class MtuPeerProbe : public PeerProbeBase {
 public:
  MtuPeerProbe(std::shared_ptr<MtuKind> kind, const topology::Peer& peer)
      : PeerProbeBase(kind->env(), "mtu", peer),
        kind_(std::move(kind)),
        timer_(env().io),
        rng_(std::random_device{}()) {
    std::tie(sent_bytes_, received_bytes_) = AddByteCounters();
  }

 private:
  struct Sent {
    Direction direction;
    int size;  // IP bytes
  };

  void StartRound(Clock::time_point) override {
    started_ = Clock::now();
    address_ = net::Unmapped(peer().address);
    v6_ = address_.is_v6();
    if (!Open()) {
      CountError("socket", std::strerror(errno));
      Close();
      EndRound();
      return;
    }
    const auto& o = kind_->options();
    interface_mtu_ = InterfaceMtu(descriptor_->native_handle(), v6_);
    int top = interface_mtu_ > 0 ? std::min(o.max_size, interface_mtu_) : o.max_size;
    top_ = top;
    forward_search_.emplace(o.min_size, top, o.max_datagrams, forward_hint_, FloorBytes(v6_));
    reverse_search_.reset();
    direction_ = Direction::kForward;
    record_answered_ = false;
    old_responder_ = false;
    sent_.clear();
    round_bytes_ = 0;
    token_ = rng_();
    Wait();
    SendNext();
  }

  void StopRound() override {
    timer_.cancel();
    Close();
  }

  bool Open() {
    int family = v6_ ? AF_INET6 : AF_INET;
    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    descriptor_.emplace(env().io, fd);
    int on = 1;
    bool ok;
    if (v6_) {
      int probe = IPV6_PMTUDISC_PROBE;
      ok = setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &probe, sizeof probe) == 0 &&
           setsockopt(fd, IPPROTO_IPV6, IPV6_DONTFRAG, &on, sizeof on) == 0 &&
           setsockopt(fd, IPPROTO_IPV6, IPV6_RECVERR, &on, sizeof on) == 0;
    } else {
      int probe = IP_PMTUDISC_PROBE;
      ok = setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &probe, sizeof probe) == 0 &&
           setsockopt(fd, IPPROTO_IP, IP_RECVERR, &on, sizeof on) == 0;
    }
    if (!ok) return false;
    // Asio's endpoint is the sockaddr_in / sockaddr_in6 the kernel takes (with the scope id).
    boost::asio::ip::udp::endpoint to(address_, peer().port);
    return connect(fd, to.data(), to.size()) == 0;
  }

  void Close() {
    if (!descriptor_) return;
    boost::system::error_code ec;
    descriptor_->close(ec);
    descriptor_.reset();
  }

  Search& search() {
    return direction_ == Direction::kForward ? *forward_search_ : *reverse_search_;
  }

  // Sends the current direction's next size, or moves on: forward, then reverse, then the end.
  // A size the local kernel did not let leave is settled at once, and the next one is sent.
  void SendNext() {
    while (SendOne()) {
    }
  }

  // Moves on to the next size to send: the current direction's next, else reverse after
  // forward. False when there is none (the round finished).
  bool NextSize() {
    for (;;) {
      bool over = direction_ == Direction::kReverse && old_responder_;
      if (!over && search().Next()) return true;
      // Reverse needs a responder that answers: not asked when nothing crossed forward.
      if (over || direction_ == Direction::kReverse || forward_search_->largest() == 0) {
        Finish();
        return false;
      }
      direction_ = Direction::kReverse;
      // Up to the forward answer: a reverse request is as large as the reply it asks for, so
      // only sizes that crossed forward can be asked back (a loss is then the return path's).
      // First guess: the last round's answer (within that bound), else the bound itself.
      const auto& o = kind_->options();
      int top = forward_search_->largest();
      reverse_search_.emplace(std::min(o.min_size, top), top, o.max_datagrams, reverse_hint_,
                              FloorBytes(v6_));
    }
  }

  // Sends one datagram: false when it is on its way (or the round is over), true when the local
  // kernel refused it at once (settled: send the next).
  bool SendOne() {
    if (!NextSize()) return false;
    int size = *search().Next();
    int header = HeaderBytes(v6_);
    echo::Header h;
    h.kind = echo::Kind::kRequest;
    if (++seq_ == 0) ++seq_;  // 0 is "none in flight"
    h.seq = seq_;
    h.token = token_;
    // Both directions send `size`: forward asks for a 24-byte acknowledgement, reverse for the
    // request back whole (its size in the record).
    auto payload = static_cast<std::uint16_t>(size - header);
    auto data = echo::EncodePayload(h, payload);
    if (direction_ == Direction::kForward) {
      echo::AskMtu(data, echo::MtuMode::kAck, 0);
    } else {
      echo::AskMtu(data, echo::MtuMode::kReturn, payload);
    }
    sent_[h.seq] = Sent{direction_, size};
    outstanding_ = h.seq;
    search().Sent();
    ssize_t n = send(descriptor_->native_handle(), data.data(), data.size(), 0);
    if (n < 0 && errno == EMSGSIZE) {
      // The local kernel refuses: larger than the interface (or, without PROBE, the path) allows.
      search().TooBig(size, 0);
      outstanding_ = 0;
      return true;
    }
    if (n < 0) {
      // It did not leave, and no ICMP error says why: a datagram lost with no error, as every
      // other sender's is. ENOBUFS (udp(7): IP_RECVERR reports it, without it the send
      // "succeeds") is the device's drop: e.g. a veth whose peer has a smaller MTU drops what
      // exceeds it (net/core/dev.c is_skb_forwardable), as a Pod's 9001 eth0 towards a 1500
      // host side does. Sent once more, as any loss; lost twice above a size that crossed, a
      // black hole.
      CountError("send_failed", std::strerror(errno));
      search().Lost(size);
      outstanding_ = 0;
      return true;
    }
    sent_bytes_->Increment(static_cast<double>(header + data.size()));
    round_bytes_ += header + data.size();
    timer_.expires_after(kind_->options().timeout);
    timer_.async_wait(IfCurrent(this, [seq = h.seq](auto& self, boost::system::error_code ec) {
      if (ec || self.outstanding_ != seq) return;
      const Sent& s = self.sent_[seq];
      self.SearchOf(s.direction).Lost(s.size);
      self.outstanding_ = 0;
      self.SendNext();
    }));
    return false;
  }

  Search& SearchOf(Direction d) {
    return d == Direction::kForward ? *forward_search_ : *reverse_search_;
  }

  void Wait() {
    descriptor_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                            IfCurrent(this, [](auto& self, boost::system::error_code ec) {
                              if (ec || !self.descriptor_) return;
                              self.Drain();
                              if (self.descriptor_) self.Wait();
                            }));
  }

  // Reads every reply and every queued error; then, when the datagram in flight was settled,
  // sends the next one.
  void Drain() {
    bool settled = false;
    std::array<std::uint8_t, 65536> buf;
    int fd = descriptor_->native_handle();
    for (int i = 0; i < 256; ++i) {  // replies
      ssize_t n = recv(fd, buf.data(), buf.size(), 0);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        continue;  // a pending error (IP_RECVERR sets it with each ICMP): read below
      }
      settled |= OnReply(std::span<const std::uint8_t>(buf.data(), static_cast<std::size_t>(n)));
    }
    for (int i = 0; i < 256; ++i) {  // errors
      std::array<std::uint8_t, 512> control;
      iovec iov{buf.data(), buf.size()};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control.data();
      msg.msg_controllen = control.size();
      ssize_t n = recvmsg(fd, &msg, MSG_ERRQUEUE);
      if (n < 0) break;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        bool v4 = c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR;
        bool v6 = c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_RECVERR;
        if (!v4 && !v6) continue;
        sock_extended_err ee;
        std::memcpy(&ee, CMSG_DATA(c), sizeof ee);
        settled |=
            OnError(ee, std::span<const std::uint8_t>(buf.data(), static_cast<std::size_t>(n)));
      }
    }
    if (settled) {
      timer_.cancel();
      outstanding_ = 0;
      SendNext();
    }
  }

  // The datagram this payload belongs to (ours, this round's).
  const Sent* Match(std::span<const std::uint8_t> payload, echo::Kind kind) {
    auto h = echo::DecodePayload(payload);
    if (!h || h->kind != kind || h->token != token_) return nullptr;
    auto it = sent_.find(h->seq);
    return it == sent_.end() ? nullptr : &it->second;
  }

  // True when the reply settles the datagram in flight.
  bool OnReply(std::span<const std::uint8_t> p) {
    const Sent* s = Match(p, echo::Kind::kReply);
    if (s == nullptr) return false;
    received_bytes_->Increment(static_cast<double>(HeaderBytes(v6_) + p.size()));
    round_bytes_ += HeaderBytes(v6_) + p.size();
    std::uint16_t seq = echo::DecodePayload(p)->seq;
    auto answer = echo::ReadMtuAnswer(p);
    Search& search = SearchOf(s->direction);
    if (answer && answer->mode == echo::MtuMode::kReturn) {
      record_answered_ = true;
      if ((answer->flags & echo::kMtuTooBig) != 0) {
        search.TooBig(s->size, 0);
      } else if (static_cast<int>(p.size()) + HeaderBytes(v6_) == s->size) {
        search.Answered(s->size);
      }
    } else if (answer) {
      record_answered_ = true;
      search.Answered(s->size);  // kAck: the request crossed whole
    } else if (echo::ReadMtuAsk(p)) {
      // Echoed whole: a responder without the MTU record. Forward, the reply crossed both ways
      // at this size; reverse, it tells nothing.
      if (s->direction == Direction::kForward) {
        if (static_cast<int>(p.size()) + HeaderBytes(v6_) == s->size) search.Answered(s->size);
      } else {
        old_responder_ = true;
      }
    }
    return seq == outstanding_;
  }

  // `quoted`: the UDP payload the ICMP error quoted (the kernel strips the IP and UDP headers).
  bool OnError(const sock_extended_err& ee, std::span<const std::uint8_t> quoted) {
    bool too_big = (ee.ee_origin == SO_EE_ORIGIN_ICMP && ee.ee_type == 3 && ee.ee_code == 4) ||
                   (ee.ee_origin == SO_EE_ORIGIN_ICMP6 && ee.ee_type == 2) ||
                   (ee.ee_origin == SO_EE_ORIGIN_LOCAL && ee.ee_errno == EMSGSIZE);
    if (!too_big) return false;  // another error (port unreachable, ...): the timeout decides
    int mtu = static_cast<int>(ee.ee_info);
    const Sent* s = Match(quoted, echo::Kind::kRequest);
    std::uint16_t seq = s != nullptr ? echo::DecodePayload(quoted)->seq : 0;
    if (s == nullptr && quoted.size() < echo::kHeaderSize && outstanding_ != 0 && mtu > 0) {
      // A router that quotes only what RFC 792 asks (the IP header and 8 bytes: none of the
      // payload; RFC 1812 §4.3.2.3 asks for more, many don't). The kernel took it on the quoted
      // addresses and ports alone (net/ipv4/icmp.c icmp_unreach, net/ipv4/udp.c
      // __udp4_lib_err; IPv6 alike): it is this socket's, and it learned the path MTU from it.
      // Datagrams go one at a time: it is the one in flight's, when larger than the MTU named
      // (else a late error about an earlier one: the search saw that one lost).
      auto it = sent_.find(outstanding_);
      if (it != sent_.end() && it->second.size > mtu) {
        s = &it->second;
        seq = outstanding_;
      }
    }
    if (s == nullptr) return false;
    SearchOf(s->direction).TooBig(s->size, mtu);
    if (ee.ee_origin != SO_EE_ORIGIN_LOCAL && s->direction == Direction::kForward && mtu > 0) {
      if (icmp_ == nullptr) icmp_ = &AddSeries(kind_->families().icmp, {});
      icmp_->Set(mtu);
    }
    return seq == outstanding_;
  }

  void Finish() {
    timer_.cancel();
    Close();
    if (!series()) return EndRound();
    const Search& fwd = *forward_search_;
    const Search rev = reverse_search_ ? *reverse_search_ : Search(0, 0, 0);
    auto& f = kind_->families();
    if (forward_ == nullptr) {  // added at the first round's end: no value before a verdict
      interface_ = &AddSeries(f.interface, {});
      forward_ = &AddSeries(f.path, {{"direction", "forward"}});
      forward_hole_ = &AddSeries(f.black_hole, {{"direction", "forward"}});
    }
    interface_->Set(interface_mtu_);
    forward_->Set(fwd.largest());
    forward_hole_->Set(fwd.black_hole() ? 1 : 0);
    forward_hint_ = fwd.exact() ? fwd.largest() : 0;
    if (fwd.largest() == 0) CountError("unreachable", "nothing crossed, not even the floor");
    // A responder whose acknowledgements carry the record answers reverse requests too (kReturn
    // has the wire value of its predecessor's mode): none back is this round's verdict, 0. With
    // nothing across forward nothing was asked back: 0 as well, never an earlier round's figure.
    bool reverse_verdict = record_answered_ || (reverse_ != nullptr && fwd.largest() == 0);
    if (reverse_verdict) {
      if (reverse_ == nullptr) {
        reverse_ = &AddSeries(f.path, {{"direction", "reverse"}});
        reverse_hole_ = &AddSeries(f.black_hole, {{"direction", "reverse"}});
      }
      reverse_->Set(rev.largest());
      reverse_hole_->Set(rev.black_hole() ? 1 : 0);
      reverse_hint_ = rev.exact() ? rev.largest() : 0;
    } else if (fwd.largest() > 0) {
      CountError("no_reverse", old_responder_ ? "the responder echoes the request whole"
                                              : "no reverse request answered");
    }
    SPDLOG_DEBUG(
        "mtu: peer={} interface={} forward={} black_hole={} icmp={} reverse={} black_hole={} "
        "datagrams={} bytes={} seconds={:.3f}",
        peer().name, interface_mtu_, fwd.largest(), fwd.black_hole(), fwd.named_mtu(),
        reverse_verdict ? rev.largest() : -1, rev.black_hole(), fwd.datagrams() + rev.datagrams(),
        round_bytes_, std::chrono::duration<double>(Clock::now() - started_).count());
    EndRound();
  }

  std::shared_ptr<MtuKind> kind_;
  boost::asio::steady_timer timer_;
  std::mt19937_64 rng_;
  std::optional<boost::asio::posix::stream_descriptor> descriptor_;
  boost::asio::ip::address address_;
  bool v6_ = false;
  int interface_mtu_ = 0;
  int top_ = 0;  // the search's upper bound this round
  std::optional<Search> forward_search_, reverse_search_;
  int forward_hint_ = 0, reverse_hint_ = 0;  // the last round's exact answers
  Direction direction_ = Direction::kForward;
  bool record_answered_ = false;  // an answer this round carried the MTU record (kAck, kReturn)
  bool old_responder_ = false;
  std::map<std::uint16_t, Sent> sent_;
  std::uint16_t seq_ = 0;
  std::uint16_t outstanding_ = 0;  // 0: none
  std::uint64_t token_ = 0;
  std::size_t round_bytes_ = 0;  // sent and received, IP packets
  Clock::time_point started_;
  prometheus::Counter* sent_bytes_ = nullptr;  // series()'s
  prometheus::Counter* received_bytes_ = nullptr;
  prometheus::Gauge* forward_ = nullptr;
  prometheus::Gauge* forward_hole_ = nullptr;
  prometheus::Gauge* reverse_ = nullptr;
  prometheus::Gauge* reverse_hole_ = nullptr;
  prometheus::Gauge* icmp_ = nullptr;
  prometheus::Gauge* interface_ = nullptr;
};

std::shared_ptr<PeerProbe> MtuKind::ForPeer(const topology::Peer& peer) {
  return std::make_shared<MtuPeerProbe>(shared_from_this(), peer);
}

}  // namespace

std::shared_ptr<ProbeKind> MakeMtuKind(const MtuOptions& options, ProbeEnv& env) {
  return std::make_shared<MtuKind>(options, env);
}

// Per peer: both directions' size and black-hole gauges, the interface MTU; the ICMP gauge only
// once an error named an MTU (a path that needs it), so not counted here.
std::size_t CountSeries(const config::Config& c, SeriesCounter& n) {
  n.Add("podnet_path_mtu_bytes", 2 * n.peers());
  n.Add("podnet_path_mtu_black_hole", 2 * n.peers());
  n.Add("podnet_path_mtu_interface_bytes", n.peers());
  return n.groups();
}

}  // namespace podnet::probes::mtu
