#include "exporter/responders/udp_echo.h"

#include <netinet/in.h>
#include <prometheus/counter.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "exporter/responders/echo_limiter.h"
#include "exporter/responders/responder_metrics.h"
#include "exporter/runtime/loop_role.h"
#include "exporter/wire/echo.h"

namespace podnet::responders {

class UdpEchoResponder::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(boost::asio::io_context& io, const net::HostPort& listen, prometheus::Registry& registry,
       const EchoLimits& limits)
      : socket_(io), registry_(registry), limiter_(limits, std::chrono::steady_clock::now()) {
    boost::asio::ip::udp::endpoint ep(listen.address, listen.port);
    socket_.open(ep.protocol());
    if (listen.address.is_v6()) socket_.set_option(boost::asio::ip::v6_only(false));
    // No SO_REUSEADDR: for UDP it lets a second socket bind the same port and silently take
    // its datagrams (there is no TIME_WAIT to wait out); a port in use must fail here.
    socket_.bind(ep);
    socket_.non_blocking(true);
    v6_ = listen.address.is_v6();
    socklen_t len = sizeof pmtudisc_v4_;
    getsockopt(socket_.native_handle(), IPPROTO_IP, IP_MTU_DISCOVER, &pmtudisc_v4_, &len);
    len = sizeof pmtudisc_v6_;
    if (v6_) {
      getsockopt(socket_.native_handle(), IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtudisc_v6_, &len);
    }
    answered_ =
        &ResponderRequests(registry).Add({{"responder", "udp_echo"}, {"result", "answered"}});
    malformed_ = ResponderDrop(registry, "udp_echo", "ignored", "malformed");
    rate_limited_ = ResponderDrop(registry, "udp_echo", "rate_limited", "rate_limited");
    source_limited_ = ResponderDrop(registry, "udp_echo", "source_limited", "source_limited");
    too_large_ = ResponderDrop(registry, "udp_echo", "too_large", "too_large");
    send_failed_ = ResponderDrop(registry, "udp_echo", "send_failed", "send_failed");
    // The kernel's count of datagrams it dropped for this socket (a full receive buffer: a
    // flood faster than the loop drains), delivered with each datagram read (socket(7)). Without
    // it (an old kernel) those drops stay uncounted, as before.
    int on = 1;
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof on);
  }

  void Start() { Wait(); }
  void Stop() {
    boost::system::error_code ec;
    socket_.close(ec);
  }
  std::uint16_t port() const { return socket_.local_endpoint().port(); }
  void SetIdentity(wire::echo::Identity identity) { identity_ = std::move(identity); }
  void SetHeardHook(HeardHook heard) { heard_ = std::move(heard); }

 private:
  void Wait() {
    socket_.async_wait(boost::asio::ip::udp::socket::wait_read,
                       [weak = weak_from_this()](boost::system::error_code ec) {
                         auto self = weak.lock();
                         if (ec || !self) return;
                         self->Drain();
                         self->Wait();
                       });
  }

  // Whether the limiter lets `from` have an answer to a request of `n` bytes (charged with the
  // request's bytes, at least the reply's); a refusal is counted by its reason.
  bool Admitted(const boost::asio::ip::udp::endpoint& from, std::size_t n) {
    switch (limiter_.Admit(from.address(), n, std::chrono::steady_clock::now())) {
      case EchoLimiter::Verdict::kAnswer:
        return true;
      case EchoLimiter::Verdict::kTooLarge:
        too_large_.Count();
        return false;
      case EchoLimiter::Verdict::kSourceLimited:
        source_limited_.Count();
        return false;
      case EchoLimiter::Verdict::kRateLimited:
        rate_limited_.Count();
        return false;
    }
    return false;
  }

  // Sends the reply `data` (of a request of `n` bytes) to `from`; a path-MTU kReturn answer
  // with the don't-fragment bit, or, refused as too big, the small answer saying so.
  boost::system::error_code SendReply(std::span<std::uint8_t> data, std::size_t n,
                                      std::optional<wire::echo::MtuRecord> mtu,
                                      const boost::asio::ip::udp::endpoint& from) {
    boost::system::error_code ec;
    if (mtu && mtu->mode == wire::echo::MtuMode::kReturn) {
      // Sent with the don't-fragment bit (IP_PMTUDISC_DO: the kernel refuses with EMSGSIZE
      // what exceeds the path MTU it knows, learned from an ICMP error, or the interface's);
      // refused, the small answer says kMtuTooBig instead: this direction's ICMP works.
      SetDontFragment(true);
      socket_.send_to(boost::asio::buffer(data.data(), data.size()), from, 0, ec);
      SetDontFragment(false);
      if (ec == boost::asio::error::message_size) {
        mtu->flags |= wire::echo::kMtuTooBig;
        data = data.first(wire::echo::MakeMtuAnswer(data, n, *mtu));
        socket_.send_to(boost::asio::buffer(data.data(), data.size()), from, 0, ec);
      }
    } else {
      socket_.send_to(boost::asio::buffer(data.data(), data.size()), from, 0, ec);
    }
    return ec;
  }

  void Drain() {
    PODNET_DCHECK_LOOP(kResponder);
    for (int i = 0; i < 256; ++i) {
      boost::asio::ip::udp::endpoint from;
      std::size_t n = 0;
      if (!Receive(from, n)) return;  // would_block: drained
      std::span<std::uint8_t> data(buffer_.data(), n);
      bool discovery = wire::echo::IsDiscoveryAsk(data);  // not a prober: no coverage
      if (!wire::echo::MakeReply(data, identity_ ? &*identity_ : nullptr)) {
        malformed_.Count();
        continue;
      }
      // The path-MTU record: kAck cuts the reply to 24 bytes, kReturn to the size it names
      // (never more than the request: MakeMtuAnswer refuses that, counted too_large).
      auto mtu = wire::echo::ReadMtuAsk(data);
      if (mtu) {
        data = data.first(wire::echo::MakeMtuAnswer(data, n, *mtu));
        if (data.empty()) {
          too_large_.Count();
          continue;
        }
      }
      if (!Admitted(from, n)) continue;
      boost::system::error_code ec = SendReply(data, n, mtu, from);
      if (ec) {
        // Admitted, yet the kernel took no reply: a destination it refuses (port 0, a broadcast
        // source), a full send buffer, no route. Not answered: counted as a drop.
        send_failed_.Count();
        SPDLOG_DEBUG("udp_echo: reply to {} not sent: {}", from.address().to_string(),
                     ec.message());
        continue;
      }
      answered_->Increment();
      if (heard_ && !discovery) heard_(from.address());
    }
  }

  // One datagram into buffer_ (recvmsg, for the SO_RXQ_OVFL count beside it): its sender and
  // length. False when none is waiting (or the socket failed: the next wake-up tries again).
  // Datagrams the kernel dropped since the last count are counted receive_buffer.
  bool Receive(boost::asio::ip::udp::endpoint& from, std::size_t& n) {
    iovec iov{buffer_.data(), buffer_.size()};
    alignas(cmsghdr) std::array<std::uint8_t, CMSG_SPACE(sizeof(std::uint32_t))> control;
    msghdr msg{};
    msg.msg_name = from.data();
    msg.msg_namelen = static_cast<socklen_t>(from.capacity());
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    ssize_t got = recvmsg(socket_.native_handle(), &msg, 0);
    if (got < 0) return false;
    from.resize(msg.msg_namelen);
    n = static_cast<std::size_t>(got);
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SO_RXQ_OVFL) continue;
      std::uint32_t drops;
      std::memcpy(&drops, CMSG_DATA(c), sizeof drops);
      // A 32-bit count since the socket opened: the difference wraps correctly.
      if (std::uint32_t added = drops - kernel_drops_; added != 0) {
        if (!receive_buffer_) {
          receive_buffer_.emplace(registry_, "udp_echo", "receive_buffer", "receive_buffer");
        }
        receive_buffer_->Count(added);
      }
      kernel_drops_ = drops;
    }
    return true;
  }

  // IP_PMTUDISC_DO around one send, then the socket's own setting again (read at start); both
  // levels on an IPv6 socket, whose IPv4-mapped peers follow IP_MTU_DISCOVER. A failure leaves
  // the reply as any other (fragmentable): the prober then reads a path larger than it is only
  // if it also reassembles, which the DF it sets itself in the forward direction does not.
  void SetDontFragment(bool on) {
    int fd = socket_.native_handle();
    int v4 = on ? IP_PMTUDISC_DO : pmtudisc_v4_;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v4, sizeof v4);
    if (v6_) {
      int v6 = on ? IPV6_PMTUDISC_DO : pmtudisc_v6_;
      setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &v6, sizeof v6);
    }
  }

  boost::asio::ip::udp::socket socket_;
  prometheus::Registry& registry_;
  bool v6_ = false;
  int pmtudisc_v4_ = IP_PMTUDISC_WANT;
  int pmtudisc_v6_ = IPV6_PMTUDISC_WANT;
  std::vector<std::uint8_t> buffer_ = std::vector<std::uint8_t>(65536);
  EchoLimiter limiter_;
  std::optional<wire::echo::Identity> identity_;
  HeardHook heard_;
  prometheus::Counter* answered_;
  ResponderDrop malformed_;  // not a podnet request: result "ignored", reason "malformed"
  ResponderDrop rate_limited_;
  ResponderDrop source_limited_;
  ResponderDrop too_large_;
  ResponderDrop send_failed_;
  // Dropped by the kernel before the responder read them: its series from the first such drop
  // (none on a Pod whose responder keeps up, which is every healthy one).
  std::optional<ResponderDrop> receive_buffer_;
  std::uint32_t kernel_drops_ = 0;  // SO_RXQ_OVFL's count at the last datagram read
};

UdpEchoResponder::UdpEchoResponder(boost::asio::io_context& io, const net::HostPort& listen,
                                   prometheus::Registry& registry, const EchoLimits& limits)
    : impl_(std::make_shared<Impl>(io, listen, registry, limits)) {
  impl_->Start();
}

UdpEchoResponder::~UdpEchoResponder() { impl_->Stop(); }

std::uint16_t UdpEchoResponder::port() const { return impl_->port(); }

void UdpEchoResponder::SetIdentity(std::string node, std::string zone, std::string pod) {
  impl_->SetIdentity({std::move(node), std::move(zone), std::move(pod)});
}

void UdpEchoResponder::SetHeardHook(HeardHook heard) { impl_->SetHeardHook(std::move(heard)); }

}  // namespace podnet::responders
