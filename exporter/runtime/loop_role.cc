#include "exporter/runtime/loop_role.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>

namespace podnet::runtime {
namespace {
thread_local Loop current = Loop::kNone;

// struct sched_attr of sched_setattr(2), its first version (48 bytes; the kernel's
// include/uapi/linux/sched/types.h, which cannot be included next to glibc's <sched.h>).
struct SchedAttr {
  std::uint32_t size;
  std::uint32_t sched_policy;
  std::uint64_t sched_flags;
  std::int32_t sched_nice;
  std::uint32_t sched_priority;
  std::uint64_t sched_runtime;
  std::uint64_t sched_deadline;
  std::uint64_t sched_period;
};
static_assert(sizeof(SchedAttr) == 48);
}  // namespace

const char* LoopName(Loop loop) {
  switch (loop) {
    case Loop::kResponder:
      return "responder";
    case Loop::kControl:
      return "control";
    case Loop::kProbe:
      return "probe";
    case Loop::kNone:
      break;
  }
  return "none";
}

BindLoop::BindLoop(Loop loop) : previous_(current) { current = loop; }
BindLoop::~BindLoop() { current = previous_; }

Loop CurrentLoop() { return current; }

bool MayRunOn(Loop loop) { return current == loop || current == Loop::kNone; }

bool MayRunOff(Loop loop) { return current != loop; }

int RequestShortSlice() {
  SchedAttr attr{};
  attr.size = sizeof attr;
  attr.sched_policy = SCHED_OTHER;
  attr.sched_nice = static_cast<std::int32_t>(getpriority(PRIO_PROCESS, 0));  // unchanged
  attr.sched_runtime = 100'000;  // ns: the smallest slice the kernel accepts
  // glibc 2.36 has no wrapper; pid 0 = the calling thread.
  if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0) return errno;
  return 0;
}

void LoopViolation(const char* what, Loop claimed, bool off) {
  // stderr, not the logger: this is a programming error found in a debug build, and the logger
  // may itself be what is misplaced.
  std::fprintf(stderr, "thread model violated: %s runs on the %s loop, %s %s\n", what,
               LoopName(current), off ? "must never run on the" : "claims the", LoopName(claimed));
  std::abort();
}

}  // namespace podnet::runtime
