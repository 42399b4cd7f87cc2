#include "exporter/app/early_signals.h"

#include <signal.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

namespace podnet::app {
namespace {

std::atomic<bool> early_reload{false};
static_assert(std::atomic<bool>::is_always_lock_free,
              "a signal handler may only use lock-free atomics");

void OnEarlySighup(int) { early_reload.store(true, std::memory_order_relaxed); }

}  // namespace

void InstallEarlySignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnEarlySighup;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a read of the configuration file is not cut short by EINTR
  sigaction(SIGHUP, &sa, nullptr);
}

void PinSignalHandlers() {
  // Reachable from these statics until exit, so a leak checker does not count them.
  static auto* const io = new boost::asio::io_context(1);
  static auto* const pinned = new boost::asio::signal_set(*io, SIGHUP, SIGINT, SIGTERM);
  (void)pinned;
}

// Earlier still than main(): the dynamic loader runs an executable's DT_PREINIT_ARRAY before any
// shared library's initializers (System V gABI, "Initialization and Termination Functions"),
// and gRPC, protobuf, abseil and OpenSSL spend most of the exporter's ~20 ms before main() in
// theirs. Only the loader's own mapping and relocation (a few ms) remain uncovered.
namespace {
void PreinitSignals(int, char**, char**) { InstallEarlySignalHandlers(); }
}  // namespace
__attribute__((section(".preinit_array"),
               used)) static void (*const preinit_signals)(int, char**, char**) = PreinitSignals;

bool TakeEarlyReload() { return early_reload.exchange(false, std::memory_order_relaxed); }

}  // namespace podnet::app
