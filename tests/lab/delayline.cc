// podnet-lab-delayline — a user-space "wire with delay" for the network-namespace lab.
//
// The lab kernel has no `netem` qdisc, so the delay between lab "nodes" comes from this program:
// an AF_PACKET bridge between two interfaces of the current network namespace.  Every frame
// received on interface A is sent out of interface B `--delay-us` microseconds after the kernel
// received it (and B -> A the same way).
//
//   podnet-lab-delayline --a IFACE_A --b IFACE_B --delay-us N
//                        [--max-seconds S] [--queue-frames Q] [--spin-us N] [--rt-priority P]
//                        [--delay-file PATH] [--quiet]
//
// Design notes
//  * Deadline = kernel receive timestamp (SO_TIMESTAMPNS, CLOCK_REALTIME, converted to
//    CLOCK_MONOTONIC) + delay, so the program's own wake-up latency on receive does not add up.
//  * It never busy-spins while idle: it sleeps in ppoll() until `margin` before the next deadline
//    (timer slack 1 ns), then spins only the last stretch, still polling the sockets.  The margin
//    adapts to the wake-up overshoot measured on this machine (99th percentile of the last 256
//    timed wake-ups, clamped to 20..300 us), or is fixed with --spin-us (0 = never spin).  With
//    no frame queued it blocks in ppoll() and uses no CPU at all.
//  * --rt-priority P runs it as SCHED_FIFO, so a busy machine (a parallel build) does not delay
//    frames; every wait stays bounded and the kernel's RT throttling still applies.
//  * Frames carry a virtio_net_hdr (PACKET_VNET_HDR) both ways, so GSO super-frames (up to 64 KiB
//    and a bit) and partial checksums (checksum offload on veth) are passed through intact:
//    the lab works with offloads on or off.
//  * PACKET_IGNORE_OUTGOING (and an sll_pkttype check) so its own transmissions are not re-read.
//  * Bounded FIFO per direction (--queue-frames, default 4096); beyond it frames are dropped and
//    counted.  Clean exit on SIGTERM/SIGINT and after --max-seconds (default 3600), with a one-line
//    summary on stderr.  SIGUSR1 prints the same line without exiting.
//  * The delay can change at run time (a latency step for the tests): with --delay-file, SIGUSR2
//    re-reads PATH (one integer, microseconds, 0..10000000; at most 63 bytes read), logs
//    "delay_us=N from PATH" and applies N to frames received from then on; a frame already
//    queued keeps its deadline.  A bad file is logged and the delay stays as it was.
//
// Linux only; libc/libstdc++ only.  Needs CAP_NET_RAW (root in the lab).

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif
#ifndef SO_TIMESTAMPNS
#define SO_TIMESTAMPNS 35
#endif

namespace {

constexpr const char* kProg = "podnet-lab-delayline";

// Same layout as struct virtio_net_hdr (linux/virtio_net.h), host endianness for AF_PACKET.
struct VnetHdr {
  uint8_t flags;
  uint8_t gso_type;
  uint16_t hdr_len;
  uint16_t gso_size;
  uint16_t csum_start;
  uint16_t csum_offset;
};
static_assert(sizeof(VnetHdr) == 10);
constexpr uint8_t kVnetFlagDataValid = 2;  // VIRTIO_NET_HDR_F_DATA_VALID

// Largest frame accepted (virtio header + Ethernet frame).  GSO frames are at most ~64 KiB plus
// headers with the default gso_max_size; leave room for a larger setting and count anything bigger.
constexpr size_t kMaxFrame = 256 * 1024;

volatile sig_atomic_t g_stop_signal = 0;
volatile sig_atomic_t g_report = 0;
volatile sig_atomic_t g_reload = 0;

void on_signal(int sig) {
  if (sig == SIGUSR1)
    g_report = 1;
  else if (sig == SIGUSR2)
    g_reload = 1;
  else
    g_stop_signal = sig;
}

int64_t clock_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
int64_t mono_ns() { return clock_ns(CLOCK_MONOTONIC); }

timespec to_timespec(int64_t ns) {
  if (ns < 0) ns = 0;
  return timespec{time_t(ns / 1'000'000'000), long(ns % 1'000'000'000)};
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

[[noreturn]] void usage(const char* msg) {
  if (msg) std::fprintf(stderr, "%s: %s\n", kProg, msg);
  std::fprintf(stderr,
               "usage: %s --a IFACE_A --b IFACE_B --delay-us N [--max-seconds S] "
               "[--queue-frames Q] [--spin-us N] [--rt-priority P] [--delay-file PATH] [--quiet]\n"
               "  Forwards every frame received on A out of B (and B out of A) N microseconds\n"
               "  after the kernel received it.  Runs in the current network namespace.\n"
               "  --max-seconds S   exit after S seconds (default 3600)\n"
               "  --queue-frames Q  per-direction queue bound, excess is dropped (default 4096)\n"
               "  --spin-us N       busy-wait at most the last N us before a deadline\n"
               "                    (default: adaptive; 0 = only sleep)\n"
               "  --rt-priority P   run as SCHED_FIFO priority P (1..99) so that a busy machine\n"
               "                    does not delay frames; 0 = normal scheduling (default)\n"
               "  --delay-file PATH on SIGUSR2, read the delay (us) from PATH and use it for\n"
               "                    frames received from then on\n",
               kProg);
  std::exit(2);
}

bool parse_int(std::string_view s, long long lo, long long hi, long long& out) {
  if (s.empty()) return false;
  std::string tmp(s);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(tmp.c_str(), &end, 10);
  if (errno || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

bool parse_seconds(std::string_view s, double& out) {
  if (s.empty()) return false;
  std::string tmp(s);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(tmp.c_str(), &end);
  if (errno || *end != '\0' || !(v > 0) || !std::isfinite(v) || v > 1e8) return false;
  out = v;
  return true;
}

struct Options {
  std::string a, b;
  long long delay_us = -1;
  double max_seconds = 3600;
  long long queue_frames = 4096;
  long long spin_us = -1;     // -1 = adaptive
  long long rt_priority = 0;  // 0 = normal scheduling
  std::string delay_file;     // re-read on SIGUSR2; empty = the delay is fixed
  bool quiet = false;
};

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") usage(nullptr);
    if (arg == "--quiet") {
      o.quiet = true;
      continue;
    }
    std::string_view key = arg, val;
    bool have_val = false;
    if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      key = arg.substr(0, eq);
      val = arg.substr(eq + 1);
      have_val = true;
    }
    if (key != "--a" && key != "--b" && key != "--delay-us" && key != "--max-seconds" &&
        key != "--queue-frames" && key != "--spin-us" && key != "--rt-priority" &&
        key != "--delay-file") {
      std::string m = "unknown argument: " + std::string(arg);
      usage(m.c_str());
    }
    if (!have_val) {
      if (i + 1 >= argc) {
        std::string m = "missing value for " + std::string(key);
        usage(m.c_str());
      }
      val = argv[++i];
    }
    long long n = 0;
    if (key == "--a") {
      o.a = std::string(val);
    } else if (key == "--b") {
      o.b = std::string(val);
    } else if (key == "--delay-us") {
      if (!parse_int(val, 0, 10'000'000, n)) usage("--delay-us must be an integer in 0..10000000");
      o.delay_us = n;
    } else if (key == "--max-seconds") {
      if (!parse_seconds(val, o.max_seconds)) usage("--max-seconds must be a positive number");
    } else if (key == "--queue-frames") {
      if (!parse_int(val, 1, 1'000'000, n))
        usage("--queue-frames must be an integer in 1..1000000");
      o.queue_frames = n;
    } else if (key == "--spin-us") {
      if (!parse_int(val, 0, 10'000, n)) usage("--spin-us must be an integer in 0..10000");
      o.spin_us = n;
    } else if (key == "--delay-file") {
      if (val.empty()) usage("--delay-file needs a path");
      o.delay_file = std::string(val);
    } else if (key == "--rt-priority") {
      if (!parse_int(val, 0, 99, n)) usage("--rt-priority must be an integer in 0..99");
      o.rt_priority = n;
    }
  }
  if (o.a.empty() || o.b.empty()) usage("--a and --b are required");
  if (o.a == o.b) usage("--a and --b must be different interfaces");
  if (o.a.size() >= IFNAMSIZ || o.b.size() >= IFNAMSIZ) usage("interface name too long");
  if (o.delay_us < 0) usage("--delay-us is required");
  return o;
}

// ---------------------------------------------------------------------------------------------

struct Frame {
  std::vector<uint8_t> data;  // virtio_net_hdr + Ethernet frame
  size_t len = 0;
  int64_t deadline = 0;  // CLOCK_MONOTONIC ns
};

// Fixed-capacity FIFO of frames; slot buffers keep their capacity to avoid reallocating.
class FrameQueue {
 public:
  explicit FrameQueue(size_t cap) : slots_(cap) {}
  bool empty() const { return count_ == 0; }
  bool full() const { return count_ == slots_.size(); }
  size_t size() const { return count_; }
  Frame& front() { return slots_[head_]; }
  Frame& push_slot() {  // caller checked !full()
    Frame& f = slots_[(head_ + count_) % slots_.size()];
    ++count_;
    return f;
  }
  void pop() {
    Frame& f = slots_[head_];
    if (f.data.capacity() > 16 * 1024) {  // don't keep GSO-sized buffers around forever
      std::vector<uint8_t>().swap(f.data);
    }
    head_ = (head_ + 1) % slots_.size();
    --count_;
  }

 private:
  std::vector<Frame> slots_;
  size_t head_ = 0, count_ = 0;
};

struct Iface {
  std::string name;
  int ifindex = 0;
  int fd = -1;
  uint64_t kernel_drops = 0;
};

struct Direction {
  const char* label;  // "a->b"
  Iface* in;
  Iface* out;
  FrameQueue q;
  uint64_t forwarded = 0, rx_late = 0, drop_queue = 0, drop_tx = 0, drop_big = 0, rx_errors = 0;
  Direction(const char* l, Iface* i, Iface* o, size_t cap) : label(l), in(i), out(o), q(cap) {}
};

// Lateness histogram in 1 us buckets (last bucket = overflow).
struct Lateness {
  static constexpr size_t kBuckets = 10001;
  std::vector<uint64_t> hist = std::vector<uint64_t>(kBuckets, 0);
  uint64_t n = 0;
  int64_t max_ns = 0;
  long double sum_ns = 0;
  void add(int64_t late_ns) {
    if (late_ns < 0) late_ns = 0;
    size_t b = std::min<size_t>(size_t(late_ns / 1000), kBuckets - 1);
    ++hist[b];
    ++n;
    sum_ns += late_ns;
    max_ns = std::max(max_ns, late_ns);
  }
  long percentile(double p) const {  // in us
    if (n == 0) return 0;
    uint64_t want = uint64_t(std::ceil(p * double(n)));
    if (want == 0) want = 1;
    uint64_t acc = 0;
    for (size_t i = 0; i < kBuckets; ++i) {
      acc += hist[i];
      if (acc >= want) return long(i);
    }
    return long(kBuckets - 1);
  }
};

// Tracks how late ppoll() wakes up compared with the requested time, to choose the spin margin.
class WakeStats {
 public:
  void add(int64_t over_ns) {
    ring_[pos_++ % ring_.size()] = std::max<int64_t>(over_ns, 0);
    if (filled_ < ring_.size()) ++filled_;
    if (pos_ % 16 == 0) recompute();
  }
  int64_t margin_ns() const { return margin_; }

 private:
  void recompute() {
    std::array<int64_t, 256> tmp{};
    std::copy_n(ring_.begin(), filled_, tmp.begin());
    // 99th percentile of the recent overshoots: on a VM the wake-up tail is long (p50 ~50 us,
    // p99 ~300 us here), and p90 left ~1 frame in 20 late by up to a few hundred us.
    size_t k = std::min(filled_ - 1, (filled_ * 99) / 100);
    std::nth_element(tmp.begin(), tmp.begin() + k, tmp.begin() + filled_);
    int64_t m = tmp[k] + 10'000;
    margin_ = std::clamp<int64_t>(m, 20'000, 300'000);
  }
  std::array<int64_t, 256> ring_{};
  size_t pos_ = 0, filled_ = 0;
  int64_t margin_ = 150'000;  // starting guess; adapts after 16 sleeps
};

int open_packet_socket(Iface& ifc) {
  ifc.ifindex = int(if_nametoindex(ifc.name.c_str()));
  if (ifc.ifindex == 0) {
    std::fprintf(stderr, "%s: interface %s: %s\n", kProg, ifc.name.c_str(), std::strerror(errno));
    return -1;
  }
  // Protocol 0 until bound, so nothing from other interfaces is queued in between.
  int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    std::fprintf(stderr, "%s: socket(AF_PACKET): %s (needs CAP_NET_RAW)\n", kProg,
                 std::strerror(errno));
    return -1;
  }
  auto must = [&](int level, int opt, int val, const char* what) {
    if (setsockopt(fd, level, opt, &val, sizeof val) != 0) {
      std::fprintf(stderr, "%s: %s: setsockopt %s: %s\n", kProg, ifc.name.c_str(), what,
                   std::strerror(errno));
      return false;
    }
    return true;
  };
  if (!must(SOL_PACKET, PACKET_VNET_HDR, 1, "PACKET_VNET_HDR") ||
      !must(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING") ||
      !must(SOL_SOCKET, SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS")) {
    close(fd);
    return -1;
  }
  // Best effort: large buffers for bursts, and skip the qdisc layer on transmit.
  int big = 8 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) != 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big) != 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  int one = 1;
  setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);

  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = ifc.ifindex;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) {
    std::fprintf(stderr, "%s: bind %s: %s\n", kProg, ifc.name.c_str(), std::strerror(errno));
    close(fd);
    return -1;
  }
  packet_mreq mr{};
  mr.mr_ifindex = ifc.ifindex;
  mr.mr_type = PACKET_MR_PROMISC;
  if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) != 0) {
    std::fprintf(stderr, "%s: %s: promiscuous mode: %s\n", kProg, ifc.name.c_str(),
                 std::strerror(errno));
    close(fd);
    return -1;
  }
  ifc.fd = fd;
  return fd;
}

void collect_kernel_drops(Iface& ifc) {
  tpacket_stats st{};
  socklen_t len = sizeof st;
  if (ifc.fd >= 0 && getsockopt(ifc.fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0)
    ifc.kernel_drops += st.tp_drops;  // the kernel resets the counters on read
}

class DelayLine {
 public:
  explicit DelayLine(const Options& o)
      : opt_(o),
        delay_ns_(o.delay_us * 1000),
        a_{o.a, 0, -1, 0},
        b_{o.b, 0, -1, 0},
        ab_("a->b", &a_, &b_, size_t(o.queue_frames)),
        ba_("b->a", &b_, &a_, size_t(o.queue_frames)),
        scratch_(kMaxFrame + 1) {}

  ~DelayLine() {
    if (a_.fd >= 0) close(a_.fd);
    if (b_.fd >= 0) close(b_.fd);
  }

  bool open() { return open_packet_socket(a_) >= 0 && open_packet_socket(b_) >= 0; }

  int run();
  void summary(const char* reason);

 private:
  void reload_delay();
  void refresh_clock_offset();
  int64_t deadline_from(const msghdr& mh, int64_t now);
  bool receive(Direction& d, int budget);
  void transmit_due();
  Direction* next_due();

  Options opt_;
  int64_t delay_ns_;
  Iface a_, b_;
  Direction ab_, ba_;
  std::vector<uint8_t> scratch_;
  int64_t real_minus_mono_ = 0;
  Lateness late_;
  WakeStats wake_;
  uint64_t no_timestamp_ = 0, fatal_errno_ = 0;
  int64_t start_ns_ = 0;
};

// SIGUSR2: the delay from --delay-file, for frames received from now on.  One bounded read.
void DelayLine::reload_delay() {
  if (opt_.delay_file.empty()) {
    std::fprintf(stderr, "%s: SIGUSR2 without --delay-file: delay_us=%lld kept\n", kProg,
                 opt_.delay_us);
    return;
  }
  char buf[64] = {};
  FILE* f = std::fopen(opt_.delay_file.c_str(), "re");
  size_t n = f ? std::fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) std::fclose(f);
  std::string_view text(buf, n);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  long long us = 0;
  if (!f || !parse_int(text, 0, 10'000'000, us)) {
    std::fprintf(stderr, "%s: %s: no delay in us (0..10000000) there: delay_us=%lld kept\n", kProg,
                 opt_.delay_file.c_str(), opt_.delay_us);
    return;
  }
  opt_.delay_us = us;
  delay_ns_ = us * 1000;
  std::fprintf(stderr, "%s: delay_us=%lld from %s\n", kProg, us, opt_.delay_file.c_str());
}

void DelayLine::refresh_clock_offset() {
  // Bracket a CLOCK_REALTIME read between two CLOCK_MONOTONIC reads (vDSO, ~20 ns each).
  int64_t m1 = mono_ns();
  int64_t r = clock_ns(CLOCK_REALTIME);
  int64_t m2 = mono_ns();
  real_minus_mono_ = r - (m1 + (m2 - m1) / 2);
}

int64_t DelayLine::deadline_from(const msghdr& mh, int64_t now) {
  for (cmsghdr* c = CMSG_FIRSTHDR(const_cast<msghdr*>(&mh)); c;
       c = CMSG_NXTHDR(const_cast<msghdr*>(&mh), c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
        c->cmsg_len >= CMSG_LEN(sizeof(timespec))) {
      timespec ts;
      std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
      int64_t rx_mono = int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec - real_minus_mono_;
      // Plausibility: not in the future, not older than a second (clock step, odd timestamp).
      if (rx_mono <= now + 1'000'000 && rx_mono >= now - 1'000'000'000)
        return std::min(rx_mono, now) + delay_ns_;
      break;
    }
  }
  ++no_timestamp_;
  return now + delay_ns_;
}

// Drains up to `budget` frames from d.in into d.q.  Returns false on a fatal error.
bool DelayLine::receive(Direction& d, int budget) {
  alignas(cmsghdr) char cbuf[256];
  refresh_clock_offset();
  for (int i = 0; i < budget; ++i) {
    sockaddr_ll from{};
    iovec iov{scratch_.data(), scratch_.size()};
    msghdr mh{};
    mh.msg_name = &from;
    mh.msg_namelen = sizeof from;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    ssize_t n = recvmsg(d.in->fd, &mh, MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR) continue;
      if (errno == ENETDOWN || errno == ENOBUFS || errno == ENOMEM) {  // link went down etc.
        ++d.rx_errors;
        return true;
      }
      if (errno == ENODEV || errno == ENXIO) {
        fatal_errno_ = errno;
        return false;
      }
      ++d.rx_errors;
      return true;
    }
    if (from.sll_pkttype == PACKET_OUTGOING) continue;  // belt and braces
    if (size_t(n) > kMaxFrame || (mh.msg_flags & MSG_TRUNC) || size_t(n) <= sizeof(VnetHdr)) {
      ++d.drop_big;
      continue;
    }
    int64_t now = mono_ns();
    if (d.q.full()) {
      ++d.drop_queue;
      continue;
    }
    Frame& f = d.q.push_slot();
    f.data.assign(scratch_.begin(), scratch_.begin() + n);
    f.len = size_t(n);
    f.deadline = deadline_from(mh, now);
    if (f.deadline <= now) ++d.rx_late;  // already due when we got it: receive wake-up was slow
    // DATA_VALID only describes what the sender's side verified; let the receiver check again.
    f.data[0] &= uint8_t(~kVnetFlagDataValid);
  }
  return true;
}

Direction* DelayLine::next_due() {
  Direction* best = nullptr;
  for (Direction* d : {&ab_, &ba_}) {
    if (d->q.empty()) continue;
    if (!best || d->q.front().deadline < best->q.front().deadline) best = d;
  }
  return best;
}

void DelayLine::transmit_due() {
  for (int guard = 0; guard < 1024; ++guard) {
    Direction* d = next_due();
    if (!d) return;
    Frame& f = d->q.front();
    int64_t now = mono_ns();
    if (f.deadline > now) return;
    late_.add(now - f.deadline);
    ssize_t n = send(d->out->fd, f.data.data(), f.len, MSG_DONTWAIT);
    if (n < 0)
      ++d->drop_tx;  // link down, ENOBUFS, ...: the wire loses the frame
    else
      ++d->forwarded;
    d->q.pop();
  }
}

int DelayLine::run() {
  sigset_t blocked, waitmask;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGINT);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGUSR1);
  sigaddset(&blocked, SIGUSR2);
  sigprocmask(SIG_BLOCK, &blocked, &waitmask);  // waitmask = previous mask, used inside ppoll
  sigdelset(&waitmask, SIGINT);
  sigdelset(&waitmask, SIGTERM);
  sigdelset(&waitmask, SIGUSR1);
  sigdelset(&waitmask, SIGUSR2);

  start_ns_ = mono_ns();
  const int64_t end_ns = start_ns_ + int64_t(opt_.max_seconds * 1e9);
  pollfd pfd[2] = {{a_.fd, POLLIN, 0}, {b_.fd, POLLIN, 0}};

  if (!opt_.quiet)
    std::fprintf(stderr, "%s: ready a=%s b=%s delay_us=%lld queue_frames=%lld max_seconds=%g\n",
                 kProg, a_.name.c_str(), b_.name.c_str(), opt_.delay_us, opt_.queue_frames,
                 opt_.max_seconds);

  const char* reason = "max-seconds";
  for (;;) {
    if (g_stop_signal) {
      reason = g_stop_signal == SIGINT ? "SIGINT" : "SIGTERM";
      break;
    }
    if (g_report) {
      g_report = 0;
      summary("report");
    }
    if (g_reload) {
      g_reload = 0;
      reload_delay();
    }
    if (!receive(ab_, 64) || !receive(ba_, 64)) {
      reason = "interface gone";
      break;
    }
    transmit_due();

    int64_t now = mono_ns();
    if (now >= end_ns) break;
    Direction* d = next_due();
    if (!d) {  // idle: sleep until a frame arrives (or a signal, or the end)
      timespec ts = to_timespec(end_ns - now);
      ppoll(pfd, 2, &ts, &waitmask);
      continue;
    }
    int64_t deadline = d->q.front().deadline;
    int64_t remain = deadline - now;
    if (remain <= 0) continue;
    int64_t margin = opt_.spin_us >= 0 ? opt_.spin_us * 1000 : wake_.margin_ns();
    if (remain > margin) {  // sleep until `margin` before the deadline
      int64_t want = deadline - margin;
      timespec ts = to_timespec(want - now);
      int r = ppoll(pfd, 2, &ts, &waitmask);
      if (r == 0 && opt_.spin_us < 0) wake_.add(mono_ns() - want);
      continue;
    }
    // Final stretch: spin, but keep taking frames in and never past the deadline.
    for (;;) {
      for (int k = 0; k < 8; ++k) cpu_relax();
      if (mono_ns() >= deadline) break;
      pollfd p2[2] = {{a_.fd, POLLIN, 0}, {b_.fd, POLLIN, 0}};
      if (poll(p2, 2, 0) > 0) break;
    }
  }
  summary(reason);
  return 0;
}

void DelayLine::summary(const char* reason) {
  collect_kernel_drops(a_);
  collect_kernel_drops(b_);
  double secs = double(mono_ns() - start_ns_) / 1e9;
  double mean_us = late_.n ? double(late_.sum_ns / late_.n) / 1000.0 : 0.0;
  std::fprintf(stderr,
               "%s: %s after %.1fs: a=%s b=%s delay_us=%lld forwarded a->b=%" PRIu64
               " b->a=%" PRIu64 " dropped queue=%" PRIu64 " tx=%" PRIu64 " oversize=%" PRIu64
               " kernel=%" PRIu64 " rx_errors=%" PRIu64
               " pending=%zu lateness_us mean=%.1f p50=%ld p99=%ld max=%.1f"
               " due_on_rx=%" PRIu64 " no_timestamp=%" PRIu64 " spin_margin_us=%lld\n",
               kProg, reason, secs, a_.name.c_str(), b_.name.c_str(), opt_.delay_us, ab_.forwarded,
               ba_.forwarded, ab_.drop_queue + ba_.drop_queue, ab_.drop_tx + ba_.drop_tx,
               ab_.drop_big + ba_.drop_big, a_.kernel_drops + b_.kernel_drops,
               ab_.rx_errors + ba_.rx_errors, ab_.q.size() + ba_.q.size(), mean_us,
               late_.percentile(0.5), late_.percentile(0.99), double(late_.max_ns) / 1000.0,
               ab_.rx_late + ba_.rx_late, no_timestamp_,
               (long long)(opt_.spin_us >= 0 ? opt_.spin_us : wake_.margin_ns() / 1000));
  if (fatal_errno_)
    std::fprintf(stderr, "%s: stopped on receive error: %s\n", kProg,
                 std::strerror(int(fatal_errno_)));
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse_args(argc, argv);

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGUSR2, &sa, nullptr);
  // SIGHUP is left alone on purpose (nohup ignores it).

  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  if (opt.rt_priority > 0) {
    // Every wait in the main loop is bounded (the spin phase ends at the next deadline), and the
    // kernel's RT throttling still applies, so this cannot take a core for good.
    sched_param sp{};
    sp.sched_priority = int(opt.rt_priority);
    if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) != 0)
      std::fprintf(stderr, "%s: SCHED_FIFO %lld not available (%s); normal scheduling\n", kProg,
                   opt.rt_priority, std::strerror(errno));
  }

  DelayLine dl(opt);
  if (!dl.open()) return 1;
  return dl.run();
}
