#include "exporter/net/ares_channel.h"

#include <arpa/nameser.h>

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
  boost::system::error_code ec;
  timer_.cancel();
  if (channel_) ares_destroy(channel_);  // callbacks get ARES_EDESTRUCTION
  sockets_.clear();
}

void AresChannel::OnSocketState(void* data, ares_socket_t fd, int readable, int writable) {
  auto* self = static_cast<AresChannel*>(data);
  if (!readable && !writable) {
    self->sockets_.erase(fd);
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

namespace {
void Trampoline(void* arg, int status, int /*timeouts*/, unsigned char* abuf, int alen) {
  std::unique_ptr<AresChannel::Callback> cb(static_cast<AresChannel::Callback*>(arg));
  (*cb)(status, abuf, alen);
}
}  // namespace

int AresChannel::Send(const std::string& name, std::uint16_t qtype, bool edns, Callback cb) {
  unsigned char* buf = nullptr;
  int len = 0;
  int rc = ares_create_query(name.c_str(), ns_c_in, qtype, 0, 1, &buf, &len, edns ? 1200 : 0);
  if (rc != ARES_SUCCESS) return -1;
  ares_send(channel_, buf, len, &Trampoline, new Callback(std::move(cb)));
  ares_free_string(buf);
  if (*alive_) ArmTimer();
  return len;
}

void AresChannel::Cancel() {
  if (channel_) ares_cancel(channel_);
  ArmTimer();
}

}  // namespace podnet::net
