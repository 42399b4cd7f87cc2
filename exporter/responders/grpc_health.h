#pragma once

#include <prometheus/registry.h>

#include <cstdint>
#include <memory>

#include "exporter/net/address.h"
#include "exporter/responders/connection_slots.h"
#include "exporter/responders/prober_tally.h"

namespace podnet::responders {

/// Bounds on the gRPC health responder's connections: SlotLimits (who holds the slots, input
/// budgets, idle timeout; its defaults are these) plus what gRPC itself is told. Costs: an idle
/// HTTP/2 connection about 45 kB in gRPC (2,500 held 111 MB in a break test); every stream a
/// client opens, a call of about 11 KiB (its arena), even when the client resets it at once. A
/// peer's probe keeps one channel: ~400 bytes to set it up, ~65 bytes a call (HPACK), each
/// answered, and a round every probes.grpc.interval (10 s; 30 s in config/podnet.yaml), so the
/// idle timeout (2 min) never closes it; with a longer interval it is closed between rounds and
/// reconnects at the next (counted as "idle_timeout").
struct GrpcConnectionLimits : SlotLimits {
  /// HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS (GRPC_ARG_MAX_CONCURRENT_STREAMS): streams open at
  /// once on a connection, for a client that acknowledged our SETTINGS (chttp2 parsing.cc checks
  /// the acknowledged value, and counts open streams only: a reset stream no longer counts).
  int max_concurrent_streams = 4;
  /// Calls alive at once on one connection, as our interceptor counts them, beyond which the
  /// connection is closed: the stream limit for a client that never acknowledges our SETTINGS
  /// or keeps calls open by not reading their answers (2x the limit above: a finished call is
  /// counted until gRPC has destroyed it).
  int max_calls_per_connection = 8;
  /// SO_RCVBUF of accepted connections (set on the listening socket, inherited; the kernel
  /// doubles it, socket(7)): how much a client can send ahead of gRPC's reads, so how much
  /// input arrives between two looks at its byte count. A health check is a few hundred bytes.
  int receive_buffer_bytes = 4096;
};

/// The gRPC health responder (responders.grpc): grpc.health.v1.Health (Check, Watch) as
/// libgrpc++'s default health service implements it, answering SERVING for the empty service
/// name. gRPC needs HTTP/2, which the one Beast HTTP/1.1 server does not speak, so it listens on
/// a port of its own (default 9480) and runs on gRPC's own threads, not on the probe loop.
///
/// Every port is open to every Pod. What Debian's gRPC (1.51.1) cannot bound by itself, and
/// why, in its source:
///  - HTTP/2 rapid reset (CVE-2023-44487). Each HEADERS frame that opens a stream makes a call
///    before any code of ours runs (src/core/lib/surface/server.cc ChannelData::AcceptStream ->
///    grpc_call_create, an arena of the channel's call size estimate, ~11 KiB here); a
///    RST_STREAM takes the stream out of chttp2's stream map at once
///    (ext/transport/chttp2/transport/frame_rst_stream.cc -> grpc_chttp2_mark_stream_closed),
///    and GRPC_ARG_MAX_CONCURRENT_STREAMS counts only that map (parsing.cc
///    init_header_frame_parser), so streams are opened and reset without limit while their
///    calls queue for the callback API's executor (surface/completion_queue.cc
///    cq_end_op_for_callback -> Executor::Run). A ResourceQuota (SetResourceQuota) only accounts
///    for the arenas: allocations never fail (lib/resource_quota/memory_quota.cc), and its
///    reclaimers close transports without streams and cancel open ones (chttp2_transport.cc
///    benign_ and destructive_reclaimer_locked), never a reset one. Measured, 8 connections x
///    10,000 reset streams: RSS 3.4 GB; 812 MB with the stream limit at 8, 1,057 MB with a
///    16 MiB quota, 737 MB with 1 KiB reads (GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE).
///  - Idle connections: GRPC_ARG_MAX_CONNECTION_IDLE_MS counts calls, not bytes (an open Watch
///    keeps a connection forever: ext/filters/channel_idle/channel_idle_filter.cc), and its
///    closes cannot be counted here.
/// So the responder owns accept(2) and guards what it hands gRPC (AddInsecureChannelFromFd):
/// one thread accepts, admits by ConnectionSlots and keeps a duplicate of each descriptor
/// (F_DUPFD_CLOEXEC: the same socket); another, the guard, reads each connection's byte count
/// from the kernel (TCP_INFO tcpi_bytes_received, through the duplicate, whenever bytes arrive:
/// epoll, edge-triggered; and every second) and shuts down (shutdown(2) on the duplicate, then
/// taking what is queued, which gRPC would still read) what must go. What bounds what:
///  - memory under rapid reset or any flood: each source's input budget (SlotLimits: 1 KiB at
///    once, 512 B/s, 256 bytes back per call answered, up to 2 KiB ahead; ~36 reset streams of 28
///    bytes) plus what gRPC reads before the shutdown (about one receive window); a source over
///    budget is refused whole until its budget has refilled. This bound is reactive: it holds while
///    the guard looks as fast as gRPC reads (measured: 10 s from 8 connections, RSS +5 MB; from 32
///    sources x 8, +15 MB), not by construction;
///  - calls kept open: max_concurrent_streams (gRPC), max_calls_per_connection (ours: an
///    interceptor counts the calls alive, matched to their connection by gRPC's peer name
///    "fd:N", ext/transport/chttp2/server/chttp2_server.cc grpc_server_add_channel_from_fd);
///  - connections: ConnectionSlots (256, 8 a source, fair eviction, 2 min idle timeout);
///  - messages: 4 KiB (SetMaxReceiveMessageSize); metadata: gRPC's default 8 KiB
///    (GRPC_ARG_MAX_METADATA_SIZE); pings: gRPC's default policy (GOAWAY after 2 strikes).
/// After a flood the freed calls stay resident in glibc's arenas: once the closing stops for a
/// second, the guard returns them (malloc_trim(3)).
/// Why a duplicate: gRPC closes its descriptor without telling us, and the kernel gives the
/// number to the next socket opened anywhere in the process, so a shutdown(2) through gRPC's
/// number, even right after its SO_COOKIE matched, could hit another socket opened in between.
/// The duplicate always names the same socket (one more descriptor a connection); gRPC's number
/// is only read (SO_COOKIE), to learn that gRPC closed it. gRPC shuts a socket down before it
/// closes it (lib/iomgr/tcp_posix.cc tcp_shutdown), so its client sees the end at once despite
/// our duplicate; were it not to, at our next look (a second).
///
/// Series: podnet_responder_requests_total{responder="grpc", result="answered" | "ignored" |
/// "failed"} per call; podnet_responder_dropped_total{responder="grpc", reason=} per call
/// "unimplemented" (another method) | "not_found" (an unknown service name) | "error", and per
/// connection refused or closed: "source_connection_limit" | "connection_limit" |
/// "input_budget" | "evicted" | "idle_timeout" (ConnectionSlots::Reason) | "too_many_calls".
/// Only in builds with PODNET_WITH_GRPC.
class GrpcHealthServer {
 public:
  /// Binds `listen` (an IPv6 wildcard also accepts IPv4; no SO_REUSEPORT: a taken port is an
  /// error, not a shared one) and starts serving. Throws boost::system::system_error with the
  /// kernel's reason when the address cannot be bound, std::runtime_error when gRPC does not
  /// start. Series: see the class.
  /// `heard` is called, on gRPC's threads, with the source of every call (ProberTally).
  GrpcHealthServer(const net::HostPort& listen, prometheus::Registry& registry,
                   const GrpcConnectionLimits& limits = {}, HeardHook heard = {});
  ~GrpcHealthServer();  // stops accepting, shuts down (in-flight calls get a short grace period)

  std::uint16_t port() const { return port_; }
  /// Connections holding a slot that gRPC has not closed yet (for tests).
  int open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::uint16_t port_ = 0;
};

}  // namespace podnet::responders
