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

/// Once the control loop has ended (the exporter stops): SIGHUP is remembered and dropped as
/// during start-up, SIGINT and SIGTERM are ignored (SIG_IGN), so that a config-map reloader's
/// SIGHUP or a second SIGTERM (`timeout` signals the whole process group) cannot end the
/// process by the signal's default action while its threads are joined: it exits 0. Stopping
/// takes milliseconds; SIGKILL still ends it. In a process that runs an App more than once
/// (tests), the next App's control loop takes the signals over again (asio's signal_set).
void HoldSignalsWhileStopping();

}  // namespace podnet::app
