#include "exporter/responders/grpc_health.h"

#include <fcntl.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_posix.h>
#include <grpcpp/support/server_interceptor.h>
#include <malloc.h>
#include <prometheus/counter.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exporter/log/last_chance.h"
#include "exporter/net/tcp_info.h"
#include "exporter/responders/responder_metrics.h"

namespace podnet::responders {

namespace {

using Reason = ConnectionSlots::Reason;

// What the responder counts (responder="grpc").
struct GrpcCounters {
  explicit GrpcCounters(prometheus::Registry& registry)
      : answered(&ResponderRequests(registry).Add({{"responder", "grpc"}, {"result", "answered"}})),
        unimplemented(registry, "grpc", "ignored", "unimplemented"),
        not_found(registry, "grpc", "ignored", "not_found"),
        failed(registry, "grpc", "failed", "error") {
    // Connections refused or closed are counted here only: they are not calls.
    auto& dropped = ResponderDropped(registry);
    for (Reason r : {Reason::kSourceConnectionLimit, Reason::kConnectionLimit, Reason::kInputBudget,
                     Reason::kEvicted, Reason::kIdleTimeout}) {
      connections[static_cast<std::size_t>(r)] =
          &dropped.Add({{"responder", "grpc"}, {"reason", ConnectionSlots::ReasonName(r)}});
    }
    too_many_calls = &dropped.Add({{"responder", "grpc"}, {"reason", "too_many_calls"}});
  }
  prometheus::Counter* answered;
  ResponderDrop unimplemented;  // a method other than grpc.health.v1.Health's
  ResponderDrop not_found;      // a service name the health service does not know
  ResponderDrop failed;         // any other status before an answer (e.g. a Watch cancelled)
  std::array<prometheus::Counter*, 5> connections{};  // by ConnectionSlots::Reason
  prometheus::Counter* too_many_calls = nullptr;
};

// Where the interceptors report the calls alive on each connection (from gRPC's threads).
class CallTracker {
 public:
  virtual ~CallTracker() = default;
  // A call began on the connection gRPC names "fd:N": that connection's id, or 0 if unknown.
  virtual std::uint64_t CallStarted(int fd) = 0;
  // It was answered (a message, or a status of our own: not cancelled by its client).
  virtual void CallAnswered(std::uint64_t connection) = 0;
  virtual void CallEnded(std::uint64_t connection) = 0;
};

// gRPC's descriptor number in the peer name of a connection added with
// AddInsecureChannelFromFd ("fd:N": chttp2_server.cc grpc_server_add_channel_from_fd), or -1.
int PeerFd(const std::string& peer) {
  int fd = -1;
  if (peer.rfind("fd:", 0) != 0) return -1;
  auto [end, ec] = std::from_chars(peer.data() + 3, peer.data() + peer.size(), fd);
  return ec == std::errc() && end == peer.data() + peer.size() ? fd : -1;
}

// Counts each call once, on gRPC's thread: "answered" at its first response message (a Check's
// answer, a Watch's first status), else at its status, by code. Interceptors are how gRPC lets
// code outside a service see its calls (grpcpp/support/interceptor.h); this one lives as long
// as its call, so it also tells the tracker when the call begins and ends.
class CountingInterceptor : public ::grpc::experimental::Interceptor {
 public:
  CountingInterceptor(const GrpcCounters& counters, CallTracker& tracker, std::uint64_t connection)
      : counters_(counters), tracker_(tracker), connection_(connection) {}
  ~CountingInterceptor() override { Ended(); }
  void Intercept(::grpc::experimental::InterceptorBatchMethods* methods) override {
    using ::grpc::experimental::InterceptionHookPoints;
    // A call whose status is being sent is over for its client, which may start the next one
    // as soon as it reads it; gRPC destroys the call (and this interceptor) later, on its own
    // threads. Counted as ended here, so that a client calling back to back never has more than
    // one call alive (before, 20 calls in a row from a fresh exporter were sometimes cut as
    // too_many_calls, 1 run in 4, while gRPC's executor was still starting).
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      Count(methods);
      Ended();
      methods->Proceed();
      return;
    }
    if (!counted_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      counted_ = true;
      counters_.answered->Increment();
      Answered();
    }
    methods->Proceed();
  }

 private:
  // Counts a call that ends with its status and was not counted at a message.
  void Count(::grpc::experimental::InterceptorBatchMethods* methods) {
    if (!counted_) {
      counted_ = true;
      switch (methods->GetSendStatus().error_code()) {
        case ::grpc::StatusCode::OK:  // no message, yet OK: nothing a health service sends
          counters_.answered->Increment();
          Answered();
          break;
        case ::grpc::StatusCode::UNIMPLEMENTED:
          counters_.unimplemented.Count();
          Answered();
          break;
        case ::grpc::StatusCode::NOT_FOUND:
          counters_.not_found.Count();
          Answered();
          break;
        default:
          counters_.failed.Count();
          break;
      }
    }
  }

  void Ended() {
    if (connection_ != 0 && !ended_) tracker_.CallEnded(connection_);
    ended_ = true;
  }

  void Answered() {
    if (connection_ != 0) tracker_.CallAnswered(connection_);
  }

  const GrpcCounters& counters_;
  CallTracker& tracker_;
  const std::uint64_t connection_;
  bool counted_ = false;
  bool ended_ = false;
};

class CountingInterceptorFactory : public ::grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  CountingInterceptorFactory(const GrpcCounters& counters, CallTracker& tracker)
      : counters_(counters), tracker_(tracker) {}
  ::grpc::experimental::Interceptor* CreateServerInterceptor(
      ::grpc::experimental::ServerRpcInfo* info) override {
    std::uint64_t connection = tracker_.CallStarted(PeerFd(info->server_context()->peer()));
    return new CountingInterceptor(counters_, tracker_, connection);  // gRPC deletes it
  }

 private:
  const GrpcCounters& counters_;
  CallTracker& tracker_;
};

using boost::asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// The kernel's 64-bit identity of the socket behind `fd` (SO_COOKIE, Linux 4.12+: unique per
// boot, never reused), or 0 when `fd` is closed or not a socket any more.
std::uint64_t SocketCookie(int fd) {
  std::uint64_t cookie = 0;
  socklen_t len = sizeof cookie;
  if (::getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0) return 0;
  return cookie;
}

}  // namespace

struct GrpcHealthServer::Impl final : CallTracker {
  using Id = ConnectionSlots::Id;  // the socket's SO_COOKIE

  // A connection handed to gRPC. gRPC owns `fd` and closes it without telling us; `copy` is
  // our duplicate of it (the same socket), through which alone we read and shut it down.
  struct Connection {
    int fd;
    int copy;
    int calls = 0;  // alive, as the interceptors report
    boost::asio::ip::address source;
  };

  Impl(const net::HostPort& listen, prometheus::Registry& registry, const GrpcConnectionLimits& l,
       HeardHook heard_hook)
      : counters(registry),
        limits(l),
        heard(std::move(heard_hook)),
        acceptor(io),
        pause(io),
        slots(l) {
    tcp::endpoint ep(listen.address, listen.port);
    acceptor.open(ep.protocol());
    acceptor.set_option(boost::asio::socket_base::reuse_address(true));
    if (listen.address.is_v6()) acceptor.set_option(boost::asio::ip::v6_only(false));
    acceptor.set_option(boost::asio::socket_base::receive_buffer_size(l.receive_buffer_bytes));
    acceptor.bind(ep);
    acceptor.listen();
    epoll = ::epoll_create1(EPOLL_CLOEXEC);
    wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 0;  // no SO_COOKIE is 0
    if (epoll < 0 || wake < 0 || ::epoll_ctl(epoll, EPOLL_CTL_ADD, wake, &ev) != 0) {
      boost::system::error_code ec(errno, boost::system::system_category());
      if (wake >= 0) ::close(wake);
      if (epoll >= 0) ::close(epoll);
      throw boost::system::system_error(ec, "epoll");
    }
  }
  ~Impl() {
    for (const auto& [id, c] : connections) ::close(c.copy);
    ::close(wake);
    ::close(epoll);
  }

  // The acceptor's thread.
  void Accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (ec == boost::asio::error::operation_aborted) return;
      if (!ec || ec == boost::asio::error::connection_aborted) {
        if (!ec) Admit(std::move(s));
        Accept();
        return;
      }
      // EMFILE, ENFILE, ENOBUFS: the connection stays in the backlog and accept would fail
      // again at once; try again in 100 ms instead of spinning.
      pause.expires_after(std::chrono::milliseconds(100));
      pause.async_wait([this](boost::system::error_code wait_ec) {
        if (!wait_ec) Accept();
      });
    });
  }

  void Admit(tcp::socket s) {
    boost::system::error_code ec;
    auto remote = s.remote_endpoint(ec);
    if (ec) return;  // already reset by the peer
    int fd = -1;
    {
      std::lock_guard lock(mu);
      const auto now = Clock::now();
      auto admission = slots.Admit(remote.address(), now);
      if (!admission.admitted) return Refuse(s, admission.refused);
      if (admission.evicted) Close(*admission.evicted, Reason::kEvicted);
      s.set_option(tcp::no_delay(true), ec);  // as gRPC's own listener does
      s.non_blocking(true, ec);
      const Id id = SocketCookie(s.native_handle());
      const int copy = ::fcntl(s.native_handle(), F_DUPFD_CLOEXEC, 0);
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;  // once per arrival: gRPC reads the data
      ev.data.u64 = id;
      if (id == 0 || copy < 0 || ::epoll_ctl(epoll, EPOLL_CTL_ADD, copy, &ev) != 0) {
        if (copy >= 0) ::close(copy);
        return;  // no room for a descriptor (EMFILE): `s` closes here
      }
      fd = s.release(ec);
      // Descriptor numbers are reused at once: one still on record is a connection gRPC closed.
      if (auto old = by_fd.find(fd); old != by_fd.end()) Forget(old->second, now);
      slots.Add(id, remote.address(), now);
      connections.emplace(id, Connection{fd, copy, 0, remote.address()});
      by_fd[fd] = id;
      // What it sent before gRPC reads anything (a flood may be queued already) counts first.
      if (!Look(id, now)) {  // over its source's budget already: never gRPC's
        ::close(fd);
        return;
      }
    }
    // Outside the lock: gRPC may run callbacks (our interceptors) before it returns.
    ::grpc::AddInsecureChannelFromFd(server.get(), fd);
  }

  // Resets `s` at once (no TIME_WAIT kept here) and counts why.
  void Refuse(tcp::socket& s, Reason why) {
    counters.connections[static_cast<std::size_t>(why)]->Increment();
    boost::system::error_code ec;
    s.set_option(boost::asio::socket_base::linger(true, 0), ec);
    s.close(ec);
  }

  // The guard's thread: looks at a connection when bytes (or its end) arrive, at all of them
  // every second (a quarter of the idle timeout, if shorter), closes what must be closed.
  void Guard() {
    const auto every = std::min<Clock::duration>(std::chrono::seconds(1), limits.idle_timeout / 4);
    auto next_sweep = Clock::now() + every;
    std::array<epoll_event, 64> events;
    while (!stopping) {
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_sweep - Clock::now());
      int n = ::epoll_wait(epoll, events.data(), static_cast<int>(events.size()),
                           static_cast<int>(std::max<std::int64_t>(0, wait.count())));
      bool trim = false;
      {
        std::lock_guard lock(mu);
        const auto now = Clock::now();
        for (int i = 0; i < n; ++i) {
          if (events[i].data.u64 != 0) Look(events[i].data.u64, now);
        }
        if (n > 0 && std::any_of(events.begin(), events.begin() + n,
                                 [](const epoll_event& e) { return e.data.u64 == 0; })) {
          std::uint64_t count;
          while (::read(wake, &count, sizeof count) > 0) {
          }
          for (Id id : too_many_calls) {
            if (!connections.contains(id)) continue;
            slots.Remove(id, now, /*cool_down=*/true);
            counters.too_many_calls->Increment();
            cut_since_sweep = true;
            Drop(id, /*shut_down=*/true);
          }
          too_many_calls.clear();
        }
        if (now >= next_sweep) {
          next_sweep = now + every;
          std::vector<Id> ids;
          for (const auto& [id, c] : connections) ids.push_back(id);
          for (Id id : ids) Look(id, now);
          for (Id id : slots.Idle(now)) Close(id, Reason::kIdleTimeout);
          // The calls a flood made are freed once gRPC has run them, but glibc keeps the
          // pages in its arenas: give them back once a sweep has passed without a cut.
          if (std::exchange(cut_since_sweep, false)) {
            trim_pending = true;
          } else {
            trim = std::exchange(trim_pending, false);
          }
        }
      }
#ifdef __GLIBC__
      if (trim) ::malloc_trim(0);  // walks every arena: not under the lock
#endif
    }
  }

  // Whether connection `id` still holds its slot: forgets it when gRPC has closed it, charges
  // what it received since the last look, and closes its source's connections if over budget.
  // Needs mu.
  bool Look(Id id, Clock::time_point now) {
    auto it = connections.find(id);
    if (it == connections.end()) return false;
    if (SocketCookie(it->second.fd) != id) {
      Forget(id, now);
      return false;
    }
    if (auto info = net::ReadTcpInfo(it->second.copy)) {
      for (Id o : slots.Received(id, info->bytes_received, now)) Close(o, Reason::kInputBudget);
    }
    return connections.contains(id);
  }

  // Shuts connection `id` down through our duplicate (gRPC then reads its end and closes its
  // descriptor), counted as `why`. ConnectionSlots has forgotten it already. Needs mu.
  void Close(Id id, Reason why) {
    counters.connections[static_cast<std::size_t>(why)]->Increment();
    cut_since_sweep = cut_since_sweep || why == Reason::kInputBudget;
    Drop(id, /*shut_down=*/true);
  }

  // A connection that ended: gRPC closed it. Needs mu.
  void Forget(Id id, Clock::time_point now) {
    slots.Remove(id, now);
    Drop(id, /*shut_down=*/false);
  }

  void Drop(Id id, bool shut_down) {
    auto it = connections.find(id);
    if (it == connections.end()) return;
    const int copy = it->second.copy;
    if (shut_down) {
      ::shutdown(copy, SHUT_RDWR);
      // What is queued would still be read by gRPC (shutdown(2) keeps it): take it first.
      static char sink[16384];  // only ever written
      for (int i = 0; i < 4 && ::recv(copy, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
      }
    }
    // Not implied by close(2): gRPC's descriptor may still refer to the same socket.
    ::epoll_ctl(epoll, EPOLL_CTL_DEL, copy, nullptr);
    ::close(copy);
    if (auto f = by_fd.find(it->second.fd); f != by_fd.end() && f->second == id) by_fd.erase(f);
    connections.erase(it);
  }

  // CallTracker, on gRPC's threads. While a call is alive its connection's descriptor stays
  // open (the call holds the transport, which closes it last), so "fd:N" is that connection.
  std::uint64_t CallStarted(int fd) override {
    boost::asio::ip::address source;
    Id id = 0;
    {
      std::lock_guard lock(mu);
      auto f = by_fd.find(fd);
      if (f == by_fd.end()) return 0;
      id = f->second;
      Connection& c = connections.at(id);
      source = c.source;
      if (++c.calls > limits.max_calls_per_connection) {
        too_many_calls.push_back(id);  // closed by the guard, which owns the descriptors
        const std::uint64_t one = 1;
        (void)!::write(wake, &one, sizeof one);
      }
    }
    if (heard) heard(source);
    return id;
  }
  void CallAnswered(std::uint64_t id) override {
    std::lock_guard lock(mu);
    slots.Answered(id, Clock::now());
  }
  void CallEnded(std::uint64_t id) override {
    std::lock_guard lock(mu);
    if (auto it = connections.find(id); it != connections.end() && it->second.calls > 0) {
      --it->second.calls;
    }
  }

  void Stop() {
    stopping = true;
    const std::uint64_t one = 1;
    (void)!::write(wake, &one, sizeof one);
    io.stop();
  }

  GrpcCounters counters;  // before server: the server's interceptors use it until it is gone
  const GrpcConnectionLimits limits;
  const HeardHook heard;  // on gRPC's threads, outside mu
  // Answers UNIMPLEMENTED to every other method. Also what makes this a callback server:
  // gRPC 1.51's builder refuses a server with neither a sync/callback method nor a polled
  // completion queue, and it only adds the default health service after that check.
  ::grpc::CallbackGenericService unimplemented;
  std::unique_ptr<::grpc::Server> server;
  // Two threads: one accepts and hands connections to gRPC (which takes a while for each),
  // one guards them (looks at their input, their end, their idleness, and closes them), so
  // that a flood is looked at as it arrives, not after the next admissions.
  boost::asio::io_context io;
  tcp::acceptor acceptor;
  boost::asio::steady_timer pause;  // after an accept error
  int epoll = -1;                   // the guard's: our duplicates, and `wake`
  int wake = -1;                    // eventfd: stop, or too_many_calls to close
  std::atomic<bool> stopping{false};
  std::thread acceptor_thread;
  std::thread guard_thread;

  mutable std::mutex mu;  // all below: the acceptor's thread, the guard's, gRPC's, tests
  ConnectionSlots slots;
  std::map<Id, Connection> connections;
  std::map<int, Id> by_fd;         // gRPC's descriptor number -> connection
  std::vector<Id> too_many_calls;  // for the guard to close
  bool cut_since_sweep = false;    // a connection was closed for what it sent
  bool trim_pending = false;
};

GrpcHealthServer::GrpcHealthServer(const net::HostPort& listen, prometheus::Registry& registry,
                                   const GrpcConnectionLimits& limits, HeardHook heard)
    : impl_(std::make_unique<Impl>(listen, registry, limits, std::move(heard))) {
  port_ = impl_->acceptor.local_endpoint().port();
  ::grpc::EnableDefaultHealthCheckService(true);
  ::grpc::ServerBuilder builder;  // no listening port: connections come from Impl::Admit
  // Bounded: small messages (health checks are a few bytes), few streams at once.
  builder.SetMaxReceiveMessageSize(4096);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams);
  builder.RegisterCallbackGenericService(&impl_->unimplemented);
  std::vector<std::unique_ptr<::grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<CountingInterceptorFactory>(impl_->counters, *impl_));
  builder.experimental().SetInterceptorCreators(std::move(creators));
  impl_->server = builder.BuildAndStart();
  if (!impl_->server) {
    throw std::runtime_error("the gRPC server did not start (see the grpc: lines above)");
  }
  impl_->Accept();
  impl_->acceptor_thread =
      std::thread([this] { log::RunOrExit("gRPC acceptor", [this] { impl_->io.run(); }); });
  impl_->guard_thread =
      std::thread([this] { log::RunOrExit("gRPC guard", [this] { impl_->Guard(); }); });
}

GrpcHealthServer::~GrpcHealthServer() {
  impl_->Stop();
  if (impl_->acceptor_thread.joinable()) impl_->acceptor_thread.join();
  if (impl_->guard_thread.joinable()) impl_->guard_thread.join();
  if (impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    impl_->server.reset();  // no call, so no interceptor, outlives this line
  }
}

int GrpcHealthServer::open_connections() const {
  std::lock_guard lock(impl_->mu);
  int open = 0;
  for (const auto& [id, c] : impl_->connections) open += SocketCookie(c.fd) == id;
  return open;
}

}  // namespace podnet::responders
