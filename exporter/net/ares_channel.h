#pragma once

#include <ares.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
///
/// The channel owns c-ares's socket calls (ares_set_socket_functions), so that:
///  - a question counts as sent only when its bytes left the socket (`on_sent`, with the time):
///    a UDP send that fails on the error of an earlier ICMP port unreachable, or a TCP
///    connection that was refused, sends nothing (what a capture shows);
///  - UDP is connected (ICMP errors come back as ECONNREFUSED, as glibc's send_dg does), or,
///    with `connect_udp` false, unconnected with sendto (as musl's res_msend.c: no ICMP errors);
///  - an IPv6 server's scope id (fe80::53%eth0) reaches connect/sendto (c-ares 1.18's server
///    list has no scope);
///  - a closed socket leaves the reactor before its fd number can be reused;
///  - a UDP question goes out with the caller's DNS ID (`wire_id`; a libc sends its query
///    buffer again unchanged, so a late reply to the first transmission answers the second),
///    and a datagram reaches c-ares only if it passes the checks of the libc the caller models
///    (Options::accept_from, Options::match_question); c-ares itself then sees its own IDs.
class AresChannel {
 public:
  struct Options {
    boost::asio::ip::address server;
    std::uint16_t port = 53;
    bool tcp = false;
    /// false: UDP questions go out with sendto on an unconnected socket (musl).
    bool connect_udp = true;
    /// c-ares's own give-up time for one question; the caller normally gives up first.
    std::chrono::milliseconds timeout{30000};
    /// Unconnected UDP only: the sources (address, port, IPv6 scope id) whose datagrams are
    /// read, as musl's res_msend.c compares the whole sockaddr with each nameserver's; others
    /// are dropped. Empty: the server only. (A connected socket: the kernel's filter.)
    std::vector<boost::asio::ip::udp::endpoint> accept_from;
    /// true: a reply must carry its question's question section (glibc res_send.c send_dg,
    /// __libc_res_queriesmatch; c-ares checks it). false: the ID alone pairs a reply with its
    /// question (musl res_msend.c): the reply's question section is replaced by the question's
    /// own before c-ares compares them, and a reply of 4 to 11 bytes is read as a header.
    bool match_question = true;
  };

  /// `status` is an ARES_* code (ARES_SUCCESS with the raw response in abuf/alen,
  /// ARES_ETIMEOUT, ARES_ECONNREFUSED, ARES_ECANCELLED, ...).
  using Callback = std::function<void(int status, const unsigned char* abuf, int alen)>;
  /// Called once when the question's last byte left the socket (never, if it did not).
  using OnSent = std::function<void(std::chrono::steady_clock::time_point)>;

  /// nullptr and *error set when c-ares cannot be initialised.
  static std::unique_ptr<AresChannel> Create(boost::asio::io_context& io, const Options& options,
                                             std::string* error);
  ~AresChannel();
  AresChannel(const AresChannel&) = delete;
  AresChannel& operator=(const AresChannel&) = delete;

  /// Sends one question (class IN, RD set; EDNS0 OPT with 1200 bytes when `edns`). Returns the
  /// query's size in bytes (DNS message only), or -1 (then `cb` is not called) when c-ares
  /// cannot encode the name. `cb` is never called from inside Send (a failure c-ares reports
  /// at once is posted to the io_context).
  /// `wire_id`: the DNS ID on the wire (UDP; TCP keeps c-ares's own).
  int Send(const std::string& name, std::uint16_t qtype, bool edns, Callback cb,
           OnSent on_sent = {}, std::optional<std::uint16_t> wire_id = std::nullopt);
  /// The same with a whole DNS message (its ID bytes are replaced), sent as it is even when
  /// it is not a well-formed question (c-ares then never pairs a reply with it). Returns its
  /// size, or -1 when it is shorter than a header.
  int SendMessage(std::string message, Callback cb, OnSent on_sent = {},
                  std::optional<std::uint16_t> wire_id = std::nullopt);

  /// Ends every outstanding question (their callbacks get ARES_ECANCELLED).
  void Cancel();

  const Options& options() const { return options_; }
  /// Replaces Options::accept_from (the nameserver list changed).
  void AcceptFrom(std::vector<boost::asio::ip::udp::endpoint> from) {
    options_.accept_from = std::move(from);
  }

 private:
  struct Socket;
  struct Pending;
  AresChannel(boost::asio::io_context& io, Options options);
  static const ares_socket_functions kSocketFunctions;
  static ares_socket_t SockOpen(int af, int type, int protocol, void* data);
  static int SockClose(ares_socket_t fd, void* data);
  static int SockConnect(ares_socket_t fd, const struct sockaddr* addr, ares_socklen_t len,
                         void* data);
  static ares_ssize_t SockRecvFrom(ares_socket_t fd, void* buf, size_t len, int flags,
                                   struct sockaddr* from, ares_socklen_t* from_len, void* data);
  static ares_ssize_t SockSendv(ares_socket_t fd, const struct iovec* iov, int n, void* data);
  static void Trampoline(void* arg, int status, int timeouts, unsigned char* abuf, int alen);
  void Forget(ares_socket_t fd);
  void Wrote(ares_socket_t fd, const struct iovec* iov, int n, std::size_t bytes);
  void MarkSent(const unsigned char* msg, std::size_t len);
  Pending* Unsent(const unsigned char* msg, std::size_t len);
  ares_ssize_t Admit(unsigned char* buf, std::size_t cap, std::size_t len, sockaddr* from,
                     ares_socklen_t* from_len);
  static void OnSocketState(void* data, ares_socket_t fd, int readable, int writable);
  void Watch(const std::shared_ptr<Socket>& s, bool read);
  void ArmTimer();

  boost::asio::io_context& io_;
  Options options_;
  ares_channel channel_ = nullptr;
  std::map<ares_socket_t, std::shared_ptr<Socket>> sockets_;
  struct FdInfo {
    bool stream = false;
    std::string partial;  // TCP: written bytes not yet a whole length-prefixed message
  };
  std::map<ares_socket_t, FdInfo> fds_;
  std::vector<std::unique_ptr<Pending>> pending_;  // questions given to c-ares, in send order
  bool in_send_ = false;
  std::uint16_t next_ares_id_ = 1;
  sockaddr_storage peer_{};  // the server as c-ares connects to it, with our scope id
  socklen_t peer_len_ = 0;
  boost::asio::steady_timer timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace podnet::net
