#include "exporter/probes/grpc/grpc_probe.h"

#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "exporter/metrics/buckets.h"
#include "exporter/metrics/families.h"
#include "exporter/net/address.h"
#include "exporter/net/sock_diag.h"
#include "exporter/net/tcp_info.h"
#include "exporter/probes/peer_probe.h"
#include "exporter/topology/safe_text.h"

namespace podnet::probes::grpc {

const char* StatusCodeName(int code) {
  static const char* kNames[] = {"OK",
                                 "CANCELLED",
                                 "UNKNOWN",
                                 "INVALID_ARGUMENT",
                                 "DEADLINE_EXCEEDED",
                                 "NOT_FOUND",
                                 "ALREADY_EXISTS",
                                 "PERMISSION_DENIED",
                                 "RESOURCE_EXHAUSTED",
                                 "FAILED_PRECONDITION",
                                 "ABORTED",
                                 "OUT_OF_RANGE",
                                 "UNIMPLEMENTED",
                                 "INTERNAL",
                                 "UNAVAILABLE",
                                 "DATA_LOSS",
                                 "UNAUTHENTICATED"};
  if (code < 0 || code >= static_cast<int>(std::size(kNames))) return "UNKNOWN";
  return kNames[code];
}

std::optional<int> DecodeHealthStatus(std::span<const std::uint8_t> m) {
  // grpc.health.v1.HealthCheckResponse (grpc's src/proto/grpc/health/v1/health.proto) has one
  // field, `ServingStatus status = 1`, an enum: a varint. The message is read by libprotobuf as
  // a set of unknown fields, so every wire type (varint, 64-bit, length-delimited, group, 32-bit)
  // is read, and skipped, as the protobuf runtime of the server's clients does. As generated
  // proto3 code parses it (protobuf.dev, "Encoding" and "Language Guide (proto3)"): a field the
  // probe does not know, whatever its number and type, is skipped; field 1 with another wire
  // type than varint is such an unknown field; when field 1 comes more than once the last one
  // wins; an enum value is the varint's low 32 bits, two's complement (open enums: a value the
  // probe does not know is kept, and is "not SERVING").
  if (m.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) return std::nullopt;
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromArray(m.data(), static_cast<int>(m.size()))) return std::nullopt;
  int status = 0;  // absent: UNKNOWN
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField& f = fields.field(i);
    if (f.number() == 1 && f.type() == google::protobuf::UnknownField::TYPE_VARINT)
      status = static_cast<std::int32_t>(static_cast<std::uint32_t>(f.varint()));
  }
  return status;
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kServing = 1;
constexpr char kCheckMethod[] = "/grpc.health.v1.Health/Check";

// Declared in `r` each time the kind is made (prometheus-cpp merges a re-declaration).
struct GrpcFamilies {
  metrics::Metrics& r;
  metrics::HistogramFamily duration =
      metrics::DeclareHistogram(r, "podnet_grpc_request_duration_seconds",
                                "gRPC health check (grpc.health.v1.Health/Check) latency of calls "
                                "answered SERVING, over a kept-open HTTP/2 channel.",
                                metrics::LatencyBuckets());
  metrics::CounterFamily& requests = metrics::DeclareCounter(
      r, "podnet_grpc_requests_total", "gRPC health checks by gRPC status code.");
};

class GrpcKind : public ProbeKind, public std::enable_shared_from_this<GrpcKind> {
 public:
  GrpcKind(const GrpcOptions& options, ProbeEnv& env)
      : options_(options), env_(env), families_{env.metrics} {}
  std::string_view name() const override { return "grpc"; }
  config::Duration interval() const override { return options_.interval; }
  std::shared_ptr<PeerProbe> ForPeer(const topology::Peer& peer) override;
  const GrpcOptions& options() const { return options_; }
  ProbeEnv& env() { return env_; }
  GrpcFamilies& families() { return families_; }

 private:
  GrpcOptions options_;
  ProbeEnv& env_;
  GrpcFamilies families_;
};

// Where gRPC's threads hand outcomes to the probe loop; cut when the probe goes away.
struct Outlet {
  std::mutex mu;
  boost::asio::io_context* io = nullptr;
};

struct Call {
  ::grpc::ClientContext ctx;
  ::grpc::ByteBuffer request;
  ::grpc::ByteBuffer response;
  Clock::time_point start;
};

class GrpcPeerProbe : public PeerProbeBase {
 public:
  GrpcPeerProbe(std::shared_ptr<GrpcKind> kind, const topology::Peer& peer)
      : PeerProbeBase(kind->env(), "grpc", peer), kind_(std::move(kind)), timer_(env().io) {
    outlet_->io = &env().io;
    std::string target = (peer.address.is_v6() ? "ipv6:" : "ipv4:") +
                         net::FormatHostPort(peer.address, kind_->options().port);
    // A subchannel pool of the channel's own (GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, grpc_types.h):
    // by default gRPC shares one connection, and its reconnect backoff, among every channel of
    // the process to an address, so a probe made for a peer that came back (a rollout's new Pod
    // on the node's old address) could inherit the old Pod's failed connection and its backoff.
    ::grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channel_ = ::grpc::CreateCustomChannel(target, ::grpc::InsecureChannelCredentials(), args);
    channel_->GetState(/*try_to_connect=*/true);  // connect before the first round
    stub_ = std::make_unique<::grpc::GenericStub>(channel_);
    duration_ = AddSeries(kind_->families().duration, {});
    std::tie(sent_bytes_, received_bytes_) = AddByteCounters();
  }

  ~GrpcPeerProbe() override {
    {
      std::lock_guard lock(outlet_->mu);
      outlet_->io = nullptr;
    }
    for (auto& c : in_flight_) c->ctx.TryCancel();
  }

 private:
  void StartRound(Clock::time_point scheduled) override {
    start_ = scheduled;
    sent_ = 0;
    finished_ = 0;
    SendNext();
  }

  void StopRound() override {
    timer_.cancel();
    for (auto& c : in_flight_) c->ctx.TryCancel();
    ChargeConnections();
  }

  // gRPC owns the channel's sockets, so the probe's bytes come from the kernel's TCP_INFO of
  // this process's connections to the peer's gRPC port (sock_diag), read at each round's end:
  // the growth since the last reading per connection, all of a new connection's (handshake
  // included). Not counted: what a connection moved after the last reading if gRPC closed it
  // before the next one (a peer that went away), and its FIN exchange. Connections of another
  // channel of this process to the same peer and port (none in the exporter) would count too.
  void ChargeConnections() {
    auto peer_address = net::Unmapped(peer().address);
    auto sockets = net::OwnTcpSocketsTo(peer_address, kind_->options().port);
    if (!sockets) {
      SPDLOG_DEBUG("grpc: peer={} sock_diag failed: {}", peer().name, std::strerror(errno));
      return;
    }
    std::map<std::uint64_t, net::WireMeter> seen;
    net::WireBytes add;
    for (const auto& s : *sockets) {
      auto& meter = seen[s.inode] = meters_[s.inode];
      add += meter.Charge(net::ConnectionWireBytes(s.info, peer_address.is_v6()));
    }
    meters_ = std::move(seen);
    if (!series()) return;
    sent_bytes_->Increment(static_cast<double>(add.sent));
    received_bytes_->Increment(static_cast<double>(add.received));
  }

  void SendNext() {
    const auto& o = kind_->options();
    auto call = std::make_shared<Call>();
    ::grpc::Slice empty("");  // HealthCheckRequest{service: ""} encodes to zero bytes
    call->request = ::grpc::ByteBuffer(&empty, 1);
    call->ctx.set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::duration_cast<std::chrono::system_clock::duration>(o.timeout));
    call->start = Clock::now();
    in_flight_.push_back(call);
    ++sent_;
    stub_->UnaryCall(&call->ctx, kCheckMethod, ::grpc::StubOptions(), &call->request,
                     &call->response,
                     [outlet = outlet_, weak = std::weak_ptr(SharedSelf<GrpcPeerProbe>()),
                      gen = generation(), call](::grpc::Status status) {
                       auto end = Clock::now();
                       std::lock_guard lock(outlet->mu);
                       if (outlet->io == nullptr) return;
                       boost::asio::post(*outlet->io, [weak, gen, call, status, end] {
                         if (auto self = weak.lock()) self->OnDone(gen, call, status, end);
                       });
                     });
    if (sent_ < o.count) {
      timer_.expires_at(start_ + o.spacing * sent_);
      timer_.async_wait(IfCurrent(this, [](auto& self, boost::system::error_code ec) {
        if (!ec) self.SendNext();
      }));
    }
  }

  void OnDone(std::uint64_t gen, const std::shared_ptr<Call>& call, const ::grpc::Status& status,
              Clock::time_point end) {
    in_flight_.erase(std::remove(in_flight_.begin(), in_flight_.end(), call), in_flight_.end());
    if (gen != generation()) return;
    Record(call, status, end);
    if (++finished_ == kind_->options().count) {
      ChargeConnections();
      EndRound();
    }
  }

  void Record(const std::shared_ptr<Call>& call, const ::grpc::Status& status,
              Clock::time_point end) {
    int code = static_cast<int>(status.error_code());
    AddSeries(kind_->families().requests, {{"code", StatusCodeName(code)}}).Increment();
    if (!status.ok()) {
      std::string reason =
          code == ::grpc::StatusCode::DEADLINE_EXCEEDED ? "timeout" : StatusCodeName(code);
      std::transform(reason.begin(), reason.end(), reason.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      // The peer's own words (grpc-message), for the debug log: bounded and escaped.
      CountError(reason, topology::SafeText(status.error_message(), topology::kMaxMessageBytes));
      return;
    }
    std::vector<::grpc::Slice> slices;
    std::vector<std::uint8_t> bytes;
    if (call->response.Dump(&slices).ok()) {
      for (const auto& s : slices) bytes.insert(bytes.end(), s.begin(), s.end());
    }
    auto serving = DecodeHealthStatus(bytes);
    if (!serving) {
      CountError("malformed_response");
    } else if (*serving != kServing) {
      CountError("not_serving");
    } else {
      duration_.Observe(std::chrono::duration<double>(end - call->start).count());
    }
  }

  std::shared_ptr<GrpcKind> kind_;
  boost::asio::steady_timer timer_;
  std::shared_ptr<Outlet> outlet_ = std::make_shared<Outlet>();
  std::shared_ptr<::grpc::Channel> channel_;
  std::unique_ptr<::grpc::GenericStub> stub_;
  metrics::HistogramSeries duration_;          // series()'s
  prometheus::Counter* sent_bytes_ = nullptr;  // series()'s
  prometheus::Counter* received_bytes_ = nullptr;
  std::map<std::uint64_t, net::WireMeter> meters_;  // by socket inode: charged so far
  std::vector<std::shared_ptr<Call>> in_flight_;
  Clock::time_point start_{};
  int sent_ = 0;
  int finished_ = 0;
};

std::shared_ptr<PeerProbe> GrpcKind::ForPeer(const topology::Peer& peer) {
  return std::make_shared<GrpcPeerProbe>(shared_from_this(), peer);
}

}  // namespace

std::shared_ptr<ProbeKind> MakeGrpcKind(const GrpcOptions& options, ProbeEnv& env) {
  return std::make_shared<GrpcKind>(options, env);
}

std::size_t CountSeries(const config::Config& c, SeriesCounter& n) {
  n.AddHistograms("podnet_grpc_request_duration_seconds", n.histogram_groups(),
                  metrics::LatencyBuckets());
  n.Add("podnet_grpc_requests_total", n.peers());  // code="OK"
  return n.groups();
}

}  // namespace podnet::probes::grpc
