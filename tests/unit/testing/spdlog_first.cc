// spdlog's registry, made before any test starts a thread. It is a function-local static of
// libspdlog.so, which ThreadSanitizer does not instrument: made by the first thread that logs,
// TSan sees no order between its construction and another thread's read of the default
// logger's level and reports a race (scripts/sanitize.sh thread, a burst client's thread and a
// burst responder's, 2026-12-08). Made here, before main, every thread starts after it.
#include <spdlog/spdlog.h>

namespace {
[[maybe_unused]] const bool kSpdlogRegistryMade = spdlog::default_logger_raw() != nullptr;
}  // namespace
