#pragma once

#include <cstdlib>

namespace podnet::runtime {

/// The event loops of a running exporter, each on a thread of its own (docs/design.md, "Thread
/// model"). Which loop owns what:
///  - kResponder: answers what peers measure — the UDP echo responder and the HTTP server's
///    sockets (accept, parse, write; /echo, /-/healthy, /-/ready and / are answered here). Nothing
///    else: no metric collection or serialization, configuration parsing, discovery or bulk
///    logging, so that a peer's RTT to this Pod is the network's, not this Pod's chores.
///  - kControl: /metrics bodies, /-/reload and SIGHUP (configuration parsing), /podnet/info,
///    signals and Kubernetes discovery (the API client, JSON decoding of relists).
///  - kProbe: the scheduler and every probe.
/// The burst responder and the gRPC health responder run on threads of their own (burst_server.h,
/// grpc_health.h) and bind no role.
enum class Loop { kNone, kResponder, kControl, kProbe };

/// "responder", "control", "probe", or "none".
const char* LoopName(Loop loop);

/// Binds the calling thread to `loop` for as long as the scope lives (the thread that runs that
/// loop's io_context makes one before io_context::run()); the previous binding comes back after.
class BindLoop {
 public:
  explicit BindLoop(Loop loop);
  ~BindLoop();
  BindLoop(const BindLoop&) = delete;
  BindLoop& operator=(const BindLoop&) = delete;

 private:
  Loop previous_;
};

/// The loop the calling thread is bound to (kNone: none, e.g. a test's own loop thread).
Loop CurrentLoop();

/// Whether code that claims to run on `loop` may run here: the calling thread is bound to
/// `loop`, or to none (unit tests drive one component on a loop of their own; only the App binds
/// roles).
bool MayRunOn(Loop loop);

/// Whether code that must never run on `loop` may run here: the calling thread is not bound to it.
bool MayRunOff(Loop loop);

/// Asks the kernel for a short time slice (100 us) for the calling thread: sched_setattr(2),
/// SCHED_OTHER with sched_runtime set, which Linux >= 6.12 (EEVDF) reads as the thread's slice.
/// A thread with a shorter slice than the running one preempts it when it wakes, instead of
/// waiting for that one's slice (~3 ms) to end ("run to parity"), so a responder woken by a
/// peer's echo does not wait behind a scrape being built on another thread of the same CPU.
/// Needs no privilege; on older kernels it fails or is ignored. Returns 0 or an errno value.
int RequestShortSlice();

/// Logs "`what` runs on the X loop, claims Y" to stderr and aborts.
[[noreturn]] void LoopViolation(const char* what, Loop claimed, bool off);

}  // namespace podnet::runtime

/// Debug builds (no NDEBUG) abort when the code around runs on a loop it does not claim:
///   PODNET_DCHECK_LOOP(kResponder)      at the top of a responder's handler;
///   PODNET_DCHECK_NOT_LOOP(kResponder)  at the top of work that must never delay a responder
///                                       (serialization, configuration parsing, discovery).
/// Release builds compile them away.
#ifndef NDEBUG
#define PODNET_DCHECK_LOOP(loop)                                                        \
  do {                                                                                  \
    if (!::podnet::runtime::MayRunOn(::podnet::runtime::Loop::loop))                    \
      ::podnet::runtime::LoopViolation(__func__, ::podnet::runtime::Loop::loop, false); \
  } while (0)
#define PODNET_DCHECK_NOT_LOOP(loop)                                                   \
  do {                                                                                 \
    if (!::podnet::runtime::MayRunOff(::podnet::runtime::Loop::loop))                  \
      ::podnet::runtime::LoopViolation(__func__, ::podnet::runtime::Loop::loop, true); \
  } while (0)
#else
#define PODNET_DCHECK_LOOP(loop) \
  do {                           \
  } while (0)
#define PODNET_DCHECK_NOT_LOOP(loop) \
  do {                               \
  } while (0)
#endif
