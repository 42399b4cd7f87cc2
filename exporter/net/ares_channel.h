#pragma once

#include <ares.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace podnet::net {

/// One c-ares channel bound to one nameserver, driven by a Boost.Asio io_context: c-ares's
/// socket state callback (ARES_OPT_SOCK_STATE_CB) maps each of its sockets to a non-owning
/// posix::stream_descriptor whose readiness calls ares_process_fd; one steady_timer follows
/// ares_timeout. Everything runs on the io_context's thread; not thread-safe.
///
/// The channel sends exactly what it is given: one question, one try, to its one server
/// (ARES_OPT_TRIES 1, ARES_FLAG_NOSEARCH, no resolv.conf, no rotation), over UDP, or over TCP
/// when `tcp` is set. Every response is handed back whatever its rcode (ARES_FLAG_NOCHECKRESP)
/// and a truncated one is not retried over TCP (ARES_FLAG_IGNTC): what happens next is the
/// caller's decision (the resolver models decide it as their libc does).
class AresChannel {
 public:
  struct Options {
    boost::asio::ip::address server;
    std::uint16_t port = 53;
    bool tcp = false;
    /// c-ares's own give-up time for one question; the caller normally gives up first.
    std::chrono::milliseconds timeout{30000};
  };

  /// `status` is an ARES_* code (ARES_SUCCESS with the raw response in abuf/alen,
  /// ARES_ETIMEOUT, ARES_ECONNREFUSED, ARES_ECANCELLED, ...).
  using Callback = std::function<void(int status, const unsigned char* abuf, int alen)>;

  /// nullptr and *error set when c-ares cannot be initialised.
  static std::unique_ptr<AresChannel> Create(boost::asio::io_context& io, const Options& options,
                                             std::string* error);
  ~AresChannel();
  AresChannel(const AresChannel&) = delete;
  AresChannel& operator=(const AresChannel&) = delete;

  /// Sends one question (class IN, RD set; EDNS0 OPT with 1200 bytes when `edns`). Returns the
  /// query's size in bytes (DNS message only), or -1 (then `cb` is not called) when c-ares
  /// cannot encode the name.
  int Send(const std::string& name, std::uint16_t qtype, bool edns, Callback cb);

  /// Ends every outstanding question (their callbacks get ARES_ECANCELLED).
  void Cancel();

  const Options& options() const { return options_; }

 private:
  struct Socket;
  AresChannel(boost::asio::io_context& io, Options options);
  static void OnSocketState(void* data, ares_socket_t fd, int readable, int writable);
  void Watch(const std::shared_ptr<Socket>& s, bool read);
  void ArmTimer();

  boost::asio::io_context& io_;
  Options options_;
  ares_channel channel_ = nullptr;
  std::map<ares_socket_t, std::shared_ptr<Socket>> sockets_;
  boost::asio::steady_timer timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace podnet::net
