#include "exporter/net/sock_diag.h"

#include <dirent.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

namespace podnet::net {
namespace {

// Socket states of include/net/tcp_states.h, as idiag_states bits.
constexpr unsigned kTimeWait = 6, kListen = 10;

// The sockfs inodes of this process's open sockets ("socket:[N]" in /proc/self/fd).
std::set<std::uint64_t> OwnSocketInodes() {
  std::set<std::uint64_t> out;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return out;
  // Bounded by the process's open file descriptors (RLIMIT_NOFILE).
  while (dirent* e = readdir(d)) {
    char link[64];
    std::string path = std::string("/proc/self/fd/") + e->d_name;
    ssize_t n = readlink(path.c_str(), link, sizeof link - 1);
    if (n <= 0) continue;
    std::string_view v(link, static_cast<std::size_t>(n));
    constexpr std::string_view kPrefix = "socket:[";
    if (v.substr(0, kPrefix.size()) != kPrefix || v.back() != ']') continue;
    std::uint64_t ino = 0;
    for (char c : v.substr(kPrefix.size(), v.size() - kPrefix.size() - 1)) {
      ino = ino * 10 + static_cast<std::uint64_t>(c - '0');
    }
    out.insert(ino);
  }
  closedir(d);
  return out;
}

bool SameAddress(const inet_diag_msg& m, const boost::asio::ip::address& peer) {
  if (peer.is_v4()) {
    auto b = peer.to_v4().to_bytes();
    if (m.idiag_family == AF_INET) return std::memcmp(m.id.idiag_dst, b.data(), 4) == 0;
    // A dual-stack socket (gRPC's) connected to ::ffff:a.b.c.d.
    static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    const auto* dst = reinterpret_cast<const unsigned char*>(m.id.idiag_dst);
    return m.idiag_family == AF_INET6 && std::memcmp(dst, kMapped, 12) == 0 &&
           std::memcmp(dst + 12, b.data(), 4) == 0;
  }
  auto b = peer.to_v6().to_bytes();
  return m.idiag_family == AF_INET6 && std::memcmp(m.id.idiag_dst, b.data(), 16) == 0;
}

// Appends the TCP sockets of `family` connected to peer:port (any owner) to *out.
bool DumpFamily(int nl, std::uint8_t family, const boost::asio::ip::address& peer,
                std::uint16_t port, std::vector<OwnTcpSocket>* out) {
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg{};
  msg.nlh.nlmsg_len = sizeof msg;
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  msg.req.sdiag_family = family;
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_ext = 1 << (INET_DIAG_INFO - 1);
  // Every state but LISTEN and TIME_WAIT (a TIME_WAIT socket has no tcp_info and no owner).
  msg.req.idiag_states = 0xfff & ~(1u << kListen) & ~(1u << kTimeWait);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(nl, &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    return false;
  }
  alignas(nlmsghdr) char buf[32768];
  // A dump ends with NLMSG_DONE; bounded anyway (1 M datagrams of up to 32 KiB).
  for (int reads = 0; reads < (1 << 20); ++reads) {
    ssize_t n = recv(nl, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) return false;
    auto len = static_cast<unsigned int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_DONE) return true;
      if (h->nlmsg_type == NLMSG_ERROR) {
        auto* err = static_cast<nlmsgerr*>(NLMSG_DATA(h));
        errno = err->error < 0 ? -err->error : EIO;
        return false;
      }
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
      auto* m = static_cast<inet_diag_msg*>(NLMSG_DATA(h));
      if (ntohs(m->id.idiag_dport) != port || !SameAddress(*m, peer) || m->idiag_inode == 0) {
        continue;
      }
      TcpInfo info;
      int attr_len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
      for (auto* a = reinterpret_cast<rtattr*>(m + 1); RTA_OK(a, attr_len);
           a = RTA_NEXT(a, attr_len)) {
        if (a->rta_type == INET_DIAG_INFO) {
          info = TcpInfoFromKernel(RTA_DATA(a), RTA_PAYLOAD(a));
        }
      }
      out->push_back({m->idiag_inode, info});
    }
  }
  errno = EOVERFLOW;
  return false;
}

}  // namespace

std::optional<std::vector<OwnTcpSocket>> OwnTcpSocketsTo(const boost::asio::ip::address& peer,
                                                         std::uint16_t port) {
  int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return std::nullopt;
  std::vector<OwnTcpSocket> found;
  bool ok =
      DumpFamily(nl, AF_INET, peer, port, &found) && DumpFamily(nl, AF_INET6, peer, port, &found);
  int saved = errno;
  close(nl);
  if (!ok) {
    errno = saved;
    return std::nullopt;
  }
  if (found.empty()) return found;
  auto own = OwnSocketInodes();
  std::erase_if(found, [&](const OwnTcpSocket& s) { return own.count(s.inode) == 0; });
  return found;
}

}  // namespace podnet::net
