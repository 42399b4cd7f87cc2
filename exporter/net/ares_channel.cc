#include "exporter/net/ares_channel.h"

#include <arpa/nameser.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace podnet::net {

struct AresChannel::Socket {
  Socket(boost::asio::io_context& io, ares_socket_t fd) : fd(fd), desc(io, fd) {}
  ~Socket() {
    boost::system::error_code ec;
    desc.cancel(ec);
    desc.release();  // c-ares owns and closes the fd
  }
  ares_socket_t fd;
  boost::asio::posix::stream_descriptor desc;
  bool want_read = false, want_write = false;
  bool reading = false, writing = false;
};

struct AresChannel::Pending {
  AresChannel* owner = nullptr;
  std::string question;  // the DNS message after its 2-byte id (c-ares sets the id)
  Callback cb;
  OnSent on_sent;
  bool sent = false;
  std::optional<std::uint16_t> wire_id;  // the ID on the wire (UDP)
  std::uint16_t ares_id = 0;             // the ID c-ares knows it by (unique in the channel)
  /// glibc (match_question): the UDP answer as received. c-ares cuts a UDP answer to 512 bytes
  /// unless its channel has ARES_FLAG_EDNS (ares_process.c process_answer, "Limit alen to
  /// PACKETSZ"), which we cannot set: it would also resend a FORMERR'd question without EDNS
  /// on its own. glibc's send_dg reads the whole datagram (an edns0 answer up to 1,200 bytes),
  /// so its answer is handed over whole. musl reads 512 bytes at most (res_msend.c): c-ares's
  /// cut is musl's.
  std::string datagram;
};

namespace {

std::uint16_t Id(const unsigned char* m) { return static_cast<std::uint16_t>((m[0] << 8) | m[1]); }
void SetId(unsigned char* m, std::uint16_t id) {
  m[0] = static_cast<unsigned char>(id >> 8);
  m[1] = static_cast<unsigned char>(id);
}

// The end of the question section of a message with one question (after its name and its
// type and class); nullopt when the name runs past the end.
std::optional<std::size_t> QuestionEnd(const unsigned char* m, std::size_t len) {
  std::size_t i = 12;
  for (int labels = 0; labels < 128 && i < len; ++labels) {
    if (m[i] == 0) return i + 5 <= len ? std::optional(i + 5) : std::nullopt;
    if ((m[i] & 0xc0) == 0xc0) return i + 6 <= len ? std::optional(i + 6) : std::nullopt;
    i += 1 + m[i];
  }
  return std::nullopt;
}

bool SameSource(const sockaddr* from, const boost::asio::ip::udp::endpoint& ep) {
  if (from->sa_family == AF_INET && ep.address().is_v4()) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(from);
    auto b = ep.address().to_v4().to_bytes();
    return ntohs(a->sin_port) == ep.port() && std::memcmp(&a->sin_addr, b.data(), 4) == 0;
  }
  if (from->sa_family == AF_INET6 && ep.address().is_v6()) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(from);
    auto v6 = ep.address().to_v6();
    auto b = v6.to_bytes();
    return ntohs(a->sin6_port) == ep.port() && std::memcmp(&a->sin6_addr, b.data(), 16) == 0 &&
           a->sin6_scope_id == v6.scope_id() && a->sin6_flowinfo == 0;
  }
  return false;
}

}  // namespace

const ares_socket_functions AresChannel::kSocketFunctions = {
    &AresChannel::SockOpen, &AresChannel::SockClose, &AresChannel::SockConnect,
    &AresChannel::SockRecvFrom, &AresChannel::SockSendv};

AresChannel::AresChannel(boost::asio::io_context& io, Options options)
    : io_(io), options_(std::move(options)), timer_(io) {}

std::unique_ptr<AresChannel> AresChannel::Create(boost::asio::io_context& io,
                                                 const Options& options, std::string* error) {
  static std::once_flag once;
  static int lib_status = ARES_SUCCESS;
  std::call_once(once, [] { lib_status = ares_library_init(ARES_LIB_INIT_ALL); });
  if (lib_status != ARES_SUCCESS) {
    *error = std::string("ares_library_init: ") + ares_strerror(lib_status);
    return nullptr;
  }
  std::unique_ptr<AresChannel> c(new AresChannel(io, options));
  ares_options o{};
  int mask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_NDOTS |
             ARES_OPT_DOMAINS | ARES_OPT_LOOKUPS | ARES_OPT_SOCK_STATE_CB | ARES_OPT_NOROTATE |
             ARES_OPT_SERVERS;
  o.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOCHECKRESP | ARES_FLAG_IGNTC | ARES_FLAG_NOALIASES |
            (options.tcp ? ARES_FLAG_USEVC : 0);
  o.timeout = static_cast<int>(options.timeout.count());
  o.tries = 1;
  o.ndots = 1;
  o.domains = nullptr;
  o.ndomains = 0;
  char lookups[] = "b";
  o.lookups = lookups;
  o.sock_state_cb = &AresChannel::OnSocketState;
  o.sock_state_cb_data = c.get();
  o.servers = nullptr;  // set below (IPv6 and ports need ares_set_servers_ports)
  o.nservers = 0;
  int rc = ares_init_options(&c->channel_, &o, mask);
  if (rc != ARES_SUCCESS) {
    *error = std::string("ares_init_options: ") + ares_strerror(rc);
    c->channel_ = nullptr;
    return nullptr;
  }
  ares_set_socket_functions(c->channel_, &kSocketFunctions, c.get());
  ares_addr_port_node server{};
  server.next = nullptr;
  if (options.server.is_v4()) {
    server.family = AF_INET;
    auto b = options.server.to_v4().to_bytes();
    std::memcpy(&server.addr.addr4, b.data(), b.size());
  } else {
    server.family = AF_INET6;
    auto b = options.server.to_v6().to_bytes();
    std::memcpy(&server.addr.addr6, b.data(), b.size());
  }
  server.udp_port = options.port;
  server.tcp_port = options.port;
  rc = ares_set_servers_ports(c->channel_, &server);
  if (rc != ARES_SUCCESS) {
    *error = std::string("ares_set_servers_ports: ") + ares_strerror(rc);
    return nullptr;
  }
  return c;
}

AresChannel::~AresChannel() {
  *alive_ = false;
  timer_.cancel();
  if (channel_) ares_destroy(channel_);  // callbacks get ARES_EDESTRUCTION
  sockets_.clear();
}

void AresChannel::OnSocketState(void* data, ares_socket_t fd, int readable, int writable) {
  auto* self = static_cast<AresChannel*>(data);
  if (!readable && !writable) {
    self->Forget(fd);
    return;
  }
  auto& s = self->sockets_[fd];
  if (!s) s = std::make_shared<Socket>(self->io_, fd);
  s->want_read = readable;
  s->want_write = writable;
  if (s->want_read && !s->reading) self->Watch(s, true);
  if (s->want_write && !s->writing) self->Watch(s, false);
}

void AresChannel::Watch(const std::shared_ptr<Socket>& s, bool read) {
  (read ? s->reading : s->writing) = true;
  s->desc.async_wait(
      read ? boost::asio::posix::stream_descriptor::wait_read
           : boost::asio::posix::stream_descriptor::wait_write,
      [this, alive = alive_, weak = std::weak_ptr<Socket>(s), read](boost::system::error_code ec) {
        if (!*alive) return;
        auto s = weak.lock();
        if (!s) return;
        (read ? s->reading : s->writing) = false;
        if (ec) return;
        ares_socket_t fd = s->fd;
        ares_process_fd(channel_, read ? fd : ARES_SOCKET_BAD, read ? ARES_SOCKET_BAD : fd);
        if (!*alive) return;
        // c-ares may have closed the socket (state callback erased it) or still want it.
        auto it = sockets_.find(fd);
        if (it != sockets_.end() && it->second == s) {
          if (read && s->want_read && !s->reading) Watch(s, true);
          if (!read && s->want_write && !s->writing) Watch(s, false);
        }
        ArmTimer();
      });
}

void AresChannel::ArmTimer() {
  timeval tv{};
  if (ares_timeout(channel_, nullptr, &tv) == nullptr) {
    timer_.cancel();
    return;
  }
  timer_.expires_after(std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec));
  timer_.async_wait([this, alive = alive_](boost::system::error_code ec) {
    if (ec || !*alive) return;
    ares_process_fd(channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    if (*alive) ArmTimer();
  });
}

// A handler running for this socket may still hold its Socket: the descriptor leaves the
// reactor now, before c-ares closes the fd and another channel's socket gets the same number
// (whose registration a late release would otherwise remove).
void AresChannel::Forget(ares_socket_t fd) {
  auto it = sockets_.find(fd);
  if (it == sockets_.end()) return;
  boost::system::error_code ec;
  it->second->desc.cancel(ec);
  it->second->desc.release();
  sockets_.erase(it);
}

ares_socket_t AresChannel::SockOpen(int af, int type, int protocol, void* data) {
  auto* self = static_cast<AresChannel*>(data);
  int fd = ::socket(af, type | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
  if (fd < 0) return ARES_SOCKET_BAD;
  bool stream = type == SOCK_STREAM;
  if (stream) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // as c-ares does itself
  }
  self->fds_[fd] = FdInfo{stream, {}};
  return fd;
}

int AresChannel::SockClose(ares_socket_t fd, void* data) {
  auto* self = static_cast<AresChannel*>(data);
  self->Forget(fd);
  self->fds_.erase(fd);
  return ::close(fd);
}

int AresChannel::SockConnect(ares_socket_t fd, const struct sockaddr* addr, ares_socklen_t len,
                             void* data) {
  auto* self = static_cast<AresChannel*>(data);
  if (len > sizeof self->peer_) {
    errno = EINVAL;
    return -1;
  }
  std::memset(&self->peer_, 0, sizeof self->peer_);
  std::memcpy(&self->peer_, addr, len);
  self->peer_len_ = len;
  if (self->peer_.ss_family == AF_INET6 && self->options_.server.is_v6()) {
    reinterpret_cast<sockaddr_in6*>(&self->peer_)->sin6_scope_id =
        self->options_.server.to_v6().scope_id();
  }
  auto it = self->fds_.find(fd);
  bool stream = it != self->fds_.end() && it->second.stream;
  if (!stream && !self->options_.connect_udp) return 0;  // sendto each datagram (musl)
  return ::connect(fd, reinterpret_cast<const sockaddr*>(&self->peer_), self->peer_len_);
}

ares_ssize_t AresChannel::SockRecvFrom(ares_socket_t fd, void* buf, size_t len, int flags,
                                       struct sockaddr* from, ares_socklen_t* from_len,
                                       void* data) {
  auto* self = static_cast<AresChannel*>(data);
  auto it = self->fds_.find(fd);
  if (it != self->fds_.end() && it->second.stream) {
    return ::recvfrom(fd, buf, len, flags, from, from_len);
  }
  // UDP: what the modelled libc would not read is dropped here, never seen by c-ares. Bounded
  // by the socket's queue and by 64 datagrams per call (the reactor calls again while the
  // socket stays readable).
  ares_socklen_t from_cap = from_len ? *from_len : 0;
  for (int i = 0; i < 64; ++i) {
    if (from_len) *from_len = from_cap;
    ares_ssize_t r = ::recvfrom(fd, buf, len, flags, from, from_len);
    if (r < 0) return r;
    r = self->Admit(static_cast<unsigned char*>(buf), len, static_cast<std::size_t>(r), from,
                    from_len);
    if (r >= 0) return r;
  }
  errno = EAGAIN;
  return -1;
}

ares_ssize_t AresChannel::Admit(unsigned char* buf, std::size_t cap, std::size_t len,
                                sockaddr* from, ares_socklen_t* from_len) {
  bool connected = options_.connect_udp;
  if (!connected && from) {
    // musl res_msend.c: "Ignore replies from addresses we didn't send to": the whole sockaddr
    // (address, port, scope) against each nameserver.
    bool known =
        options_.accept_from.empty()
            ? SameSource(from, boost::asio::ip::udp::endpoint(options_.server, options_.port))
            : std::any_of(options_.accept_from.begin(), options_.accept_from.end(),
                          [&](const auto& ep) { return SameSource(from, ep); });
    if (!known) return -1;
    // c-ares compares the address with its one server's.
    if (from_len && peer_len_ > 0 && *from_len >= peer_len_) {
      std::memcpy(from, &peer_, peer_len_);
      *from_len = peer_len_;
    }
  }
  // musl reads a reply of 4 bytes or more ("Ignore non-identifiable packets"); glibc and c-ares
  // need a header (12).
  if (len < (options_.match_question ? 12u : 4u)) return options_.match_question ? len : -1;
  // The ID: the latest transmission under it (a libc's retransmission reuses its buffer).
  Pending* match = nullptr;
  for (auto& p : pending_) {
    if (p->sent && p->wire_id && *p->wire_id == Id(buf)) match = p.get();
  }
  if (!match) {
    bool translated = std::any_of(pending_.begin(), pending_.end(),
                                  [](const auto& p) { return p->wire_id.has_value(); });
    return translated ? -1 : static_cast<ares_ssize_t>(len);
  }
  SetId(buf, match->ares_id);
  if (options_.match_question) {
    match->datagram.assign(reinterpret_cast<const char*>(buf), len);
    return static_cast<ares_ssize_t>(len);
  }
  // musl pairs by ID alone: give c-ares the question it asked.
  const auto* q = reinterpret_cast<const unsigned char*>(match->question.data()) - 2;
  auto qend = QuestionEnd(q, match->question.size() + 2);
  if (!qend) return static_cast<ares_ssize_t>(len);  // c-ares cannot read its own question
  std::size_t rend = len < 12 ? len : QuestionEnd(buf, len).value_or(len);
  std::string out(reinterpret_cast<const char*>(buf), std::min<std::size_t>(len, 12));
  out.resize(12, '\0');
  out[4] = 0;
  out[5] = 1;  // one question
  out.append(reinterpret_cast<const char*>(q) + 12, *qend - 12);
  if (rend < len) out.append(reinterpret_cast<const char*>(buf) + rend, len - rend);
  if (out.size() > cap) return static_cast<ares_ssize_t>(len);
  std::memcpy(buf, out.data(), out.size());
  return static_cast<ares_ssize_t>(out.size());
}

ares_ssize_t AresChannel::SockSendv(ares_socket_t fd, const struct iovec* iov, int n, void* data) {
  auto* self = static_cast<AresChannel*>(data);
  auto it = self->fds_.find(fd);
  bool stream = it != self->fds_.end() && it->second.stream;
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = static_cast<std::size_t>(n);
  std::string msg;
  iovec one{};
  if (!stream) {
    // The caller's ID on the wire; c-ares's is kept to give replies back under it.
    for (int i = 0; i < n; ++i)
      msg.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
    auto* bytes = reinterpret_cast<unsigned char*>(msg.data());
    if (Pending* p = self->Unsent(bytes, msg.size()); p && p->wire_id) SetId(bytes, *p->wire_id);
    one.iov_base = msg.data();
    one.iov_len = msg.size();
    m.msg_iov = &one;
    m.msg_iovlen = 1;
  }
  if (!stream && !self->options_.connect_udp) {
    m.msg_name = &self->peer_;
    m.msg_namelen = self->peer_len_;
  }
  ssize_t r = ::sendmsg(fd, &m, MSG_NOSIGNAL);
  if (r < 0 && errno == ECONNREFUSED && !stream) {
    // The refusal (ICMP port unreachable) of the datagram before this one, reported by this
    // send, which did not go out. glibc sends its A and AAAA pair in one sendmmsg, so both
    // leave before the refusal comes back (2 questions to a refusing server on the wire): this
    // one is sent again once; the next refusal reaches c-ares's read and ends both.
    r = ::sendmsg(fd, &m, MSG_NOSIGNAL);
  }
  if (r > 0)
    self->Wrote(fd, m.msg_iov, static_cast<int>(m.msg_iovlen), static_cast<std::size_t>(r));
  return r;
}

void AresChannel::Wrote(ares_socket_t fd, const struct iovec* iov, int n, std::size_t bytes) {
  std::string out;
  for (int i = 0; i < n && out.size() < bytes; ++i) {
    std::size_t take = std::min(iov[i].iov_len, bytes - out.size());
    out.append(static_cast<const char*>(iov[i].iov_base), take);
  }
  auto it = fds_.find(fd);
  if (it == fds_.end() || !it->second.stream) {
    MarkSent(reinterpret_cast<const unsigned char*>(out.data()), out.size());
    return;
  }
  // TCP: RFC 1035 4.2.2 two-byte length, then the message; a write may end mid-message.
  std::string& buf = it->second.partial;
  buf += out;
  while (buf.size() >= 2) {
    std::size_t len =
        (static_cast<unsigned char>(buf[0]) << 8) | static_cast<unsigned char>(buf[1]);
    if (buf.size() < 2 + len) break;
    MarkSent(reinterpret_cast<const unsigned char*>(buf.data()) + 2, len);
    buf.erase(0, 2 + len);
  }
}

AresChannel::Pending* AresChannel::Unsent(const unsigned char* msg, std::size_t len) {
  if (len < 12) return nullptr;
  for (auto& p : pending_) {
    if (!p->sent && p->question.size() + 2 == len &&
        std::memcmp(p->question.data(), msg + 2, len - 2) == 0) {
      return p.get();
    }
  }
  return nullptr;
}

void AresChannel::MarkSent(const unsigned char* msg, std::size_t len) {
  Pending* p = Unsent(msg, len);
  if (!p) return;
  p->sent = true;
  if (p->on_sent) p->on_sent(std::chrono::steady_clock::now());
}

void AresChannel::Trampoline(void* arg, int status, int /*timeouts*/, unsigned char* abuf,
                             int alen) {
  auto* p = static_cast<Pending*>(arg);
  AresChannel* self = p->owner;
  Callback cb = std::move(p->cb);
  std::string whole = std::move(p->datagram);
  if (status == ARES_SUCCESS && abuf && alen >= 0 &&
      whole.size() > static_cast<std::size_t>(alen) &&
      std::memcmp(whole.data(), abuf, static_cast<std::size_t>(alen)) == 0) {
    abuf = reinterpret_cast<unsigned char*>(whole.data());  // c-ares cut it (Pending::datagram)
    alen = static_cast<int>(whole.size());
  }
  auto it = std::find_if(self->pending_.begin(), self->pending_.end(),
                         [p](const auto& q) { return q.get() == p; });
  if (it != self->pending_.end()) self->pending_.erase(it);
  if (self->in_send_ && status != ARES_EDESTRUCTION) {
    // c-ares ended the question inside ares_send (its write failed): the caller hears it from
    // the loop, not in the middle of Send.
    std::vector<unsigned char> copy(abuf, abuf + (abuf && alen > 0 ? alen : 0));
    boost::asio::post(self->io_, [cb = std::move(cb), status, copy = std::move(copy)] {
      cb(status, copy.empty() ? nullptr : copy.data(), static_cast<int>(copy.size()));
    });
    return;
  }
  cb(status, abuf, alen);
}

int AresChannel::Send(const std::string& name, std::uint16_t qtype, bool edns, Callback cb,
                      OnSent on_sent, std::optional<std::uint16_t> wire_id) {
  unsigned char* buf = nullptr;
  int len = 0;
  int rc = ares_create_query(name.c_str(), ns_c_in, qtype, 0, 1, &buf, &len, edns ? 1200 : 0);
  if (rc != ARES_SUCCESS) return -1;
  std::string message(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(len));
  ares_free_string(buf);
  return SendMessage(std::move(message), std::move(cb), std::move(on_sent), wire_id);
}

int AresChannel::SendMessage(std::string message, Callback cb, OnSent on_sent,
                             std::optional<std::uint16_t> wire_id) {
  if (message.size() < 12) return -1;
  auto p = std::make_unique<Pending>();
  p->owner = this;
  // c-ares 1.18 keeps the ID it is given (ares_send.c: qid from qbuf) and pairs a reply with the
  // first outstanding query of that ID: each gets its own (at most 64 Ki outstanding).
  for (std::size_t i = 0; i <= pending_.size(); ++i) {
    p->ares_id = next_ares_id_++;
    if (std::none_of(pending_.begin(), pending_.end(),
                     [&](const auto& q) { return q->ares_id == p->ares_id; })) {
      break;
    }
  }
  SetId(reinterpret_cast<unsigned char*>(message.data()), p->ares_id);
  p->question = message.substr(2);
  p->cb = std::move(cb);
  p->on_sent = std::move(on_sent);
  p->wire_id = options_.tcp ? std::nullopt : wire_id;
  Pending* raw = p.get();
  pending_.push_back(std::move(p));
  in_send_ = true;
  ares_send(channel_, reinterpret_cast<const unsigned char*>(message.data()),
            static_cast<int>(message.size()), &Trampoline, raw);
  in_send_ = false;
  if (*alive_) ArmTimer();
  return static_cast<int>(message.size());
}

void AresChannel::Cancel() {
  if (channel_) ares_cancel(channel_);
  ArmTimer();
}

}  // namespace podnet::net
