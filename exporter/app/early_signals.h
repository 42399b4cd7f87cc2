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

}  // namespace podnet::app
