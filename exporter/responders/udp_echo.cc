#include "exporter/responders/udp_echo.h"

#include <netinet/in.h>
#include <prometheus/counter.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <boost/asio/ip/udp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "exporter/proto/echo.h"
#include "exporter/responders/echo_limiter.h"
#include "exporter/responders/responder_metrics.h"
#include "exporter/runtime/loop_role.h"

namespace podnet::responders {

class UdpEchoResponder::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(boost::asio::io_context& io, const net::HostPort& listen, prometheus::Registry& registry,
       const EchoLimits& limits)
      : socket_(io), limiter_(limits, std::chrono::steady_clock::now()) {
    boost::asio::ip::udp::endpoint ep(listen.address, listen.port);
    socket_.open(ep.protocol());
    if (listen.address.is_v6()) socket_.set_option(boost::asio::ip::v6_only(false));
    // No SO_REUSEADDR: for UDP it lets a second socket bind the same port and silently take
    // its datagrams (there is no TIME_WAIT to wait out); a port in use must fail here.
    socket_.bind(ep);
    socket_.non_blocking(true);
    answered_ =
        &ResponderRequests(registry).Add({{"responder", "udp_echo"}, {"result", "answered"}});
    malformed_ = ResponderDrop(registry, "udp_echo", "ignored", "malformed");
    rate_limited_ = ResponderDrop(registry, "udp_echo", "rate_limited", "rate_limited");
    source_limited_ = ResponderDrop(registry, "udp_echo", "source_limited", "source_limited");
    too_large_ = ResponderDrop(registry, "udp_echo", "too_large", "too_large");
    send_failed_ = ResponderDrop(registry, "udp_echo", "send_failed", "send_failed");
  }

  void Start() { Wait(); }
  void Stop() {
    boost::system::error_code ec;
    socket_.close(ec);
  }
  std::uint16_t port() const { return socket_.local_endpoint().port(); }
  void SetIdentity(proto::echo::Identity identity) { identity_ = std::move(identity); }

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

  void Drain() {
    PODNET_DCHECK_LOOP(kResponder);
    for (int i = 0; i < 256; ++i) {
      boost::asio::ip::udp::endpoint from;
      boost::system::error_code ec;
      std::size_t n = socket_.receive_from(boost::asio::buffer(buffer_), from, 0, ec);
      if (ec) return;  // would_block: drained
      std::span<std::uint8_t> data(buffer_.data(), n);
      if (!proto::echo::MakeReply(data, identity_ ? &*identity_ : nullptr)) {
        malformed_.Count();
        continue;
      }
      switch (limiter_.Admit(from.address(), n, std::chrono::steady_clock::now())) {
        case EchoLimiter::Verdict::kAnswer:
          break;
        case EchoLimiter::Verdict::kTooLarge:
          too_large_.Count();
          continue;
        case EchoLimiter::Verdict::kSourceLimited:
          source_limited_.Count();
          continue;
        case EchoLimiter::Verdict::kRateLimited:
          rate_limited_.Count();
          continue;
      }
      socket_.send_to(boost::asio::buffer(data.data(), data.size()), from, 0, ec);
      if (ec) {
        // Admitted, yet the kernel took no reply: a destination it refuses (port 0, a broadcast
        // source), a full send buffer, no route. Not answered: counted as a drop.
        send_failed_.Count();
        SPDLOG_DEBUG("udp_echo: reply to {} not sent: {}", from.address().to_string(),
                     ec.message());
        continue;
      }
      answered_->Increment();
    }
  }

  boost::asio::ip::udp::socket socket_;
  std::vector<std::uint8_t> buffer_ = std::vector<std::uint8_t>(65536);
  EchoLimiter limiter_;
  std::optional<proto::echo::Identity> identity_;
  prometheus::Counter* answered_;
  ResponderDrop malformed_;  // not a podnet request: result "ignored", reason "malformed"
  ResponderDrop rate_limited_;
  ResponderDrop source_limited_;
  ResponderDrop too_large_;
  ResponderDrop send_failed_;
};

UdpEchoResponder::UdpEchoResponder(boost::asio::io_context& io, const net::HostPort& listen,
                                   prometheus::Registry& registry, const EchoLimits& limits)
    : impl_(std::make_shared<Impl>(io, listen, registry, limits)) {
  impl_->Start();
}

UdpEchoResponder::~UdpEchoResponder() { impl_->Stop(); }

std::uint16_t UdpEchoResponder::port() const { return impl_->port(); }

void UdpEchoResponder::SetIdentity(std::string node, std::string zone) {
  impl_->SetIdentity({std::move(node), std::move(zone)});
}

}  // namespace podnet::responders
