#pragma once

namespace podnet::app {

/// Makes SIGHUP harmless from the first line of main() until the control loop takes signals
/// over: its default action (signal(7): terminate) would otherwise kill a process that is
/// still loading its configuration or binding its listeners. A SIGHUP that arrives meanwhile is
/// remembered, not acted on. SIGINT and SIGTERM keep their default action: stopping is what
/// they ask for at any time. Async-signal-safe (sigaction(2) with a handler that only stores a
/// lock-free atomic flag). It runs from the executable's .preinit_array (before the shared
/// libraries' initializers, which take most of the start-up time) and again from main() (where
/// it documents the intent; installing it twice is harmless). Call it before any thread starts.
void InstallEarlySignalHandlers();

/// Whether a SIGHUP arrived since InstallEarlySignalHandlers (and clears it). Call it after the
/// loop's own handler is installed (boost::asio::signal_set replaces the early one), so that a
/// reload asked for during start-up is done, not lost.
bool TakeEarlyReload();

/// Keeps boost::asio's signal handler on SIGHUP, SIGINT and SIGTERM for the rest of the
/// process's life. asio puts the default action (signal(7): terminate) back when the last
/// signal_set registered for a signal goes (signal_set_service::remove, Boost 1.74), so a
/// config-map reloader's SIGHUP or a second SIGTERM (`timeout` signals the whole process
/// group) arriving as the control loop's set was destroyed could end a stopping exporter by the
/// signal instead of exit 0 (1 run in ~40 of cli_test's stop check). One more set, on an
/// io_context that never runs and is never destroyed, keeps each signal's registration count
/// above zero: after the control loop has ended, asio's handler only writes the signal to its
/// pipe, which nobody reads, and the exporter exits 0; SIGKILL still ends it. A later App in the
/// same process (tests) gets the signals through its own set, as the handler is asio's. Call it
/// after the control loop's set is registered (a signal in between would go to this set and be
/// lost); idempotent and thread-safe; one io_context (an epoll and an eventfd) per process.
void PinSignalHandlers();

}  // namespace podnet::app
