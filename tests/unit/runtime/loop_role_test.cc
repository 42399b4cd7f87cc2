// The checks as a debug build compiles them, whatever this build's NDEBUG.
#undef NDEBUG
#include "exporter/runtime/loop_role.h"

#include <gtest/gtest.h>

#include <thread>

namespace podnet::runtime {
namespace {

TEST(LoopRoleTest, AThreadBoundToALoopMayRunOnlyThatLoopsCode) {
  EXPECT_EQ(CurrentLoop(), Loop::kNone);
  EXPECT_TRUE(MayRunOn(Loop::kResponder));  // unbound: a test's own loop
  {
    BindLoop bind(Loop::kControl);
    EXPECT_EQ(CurrentLoop(), Loop::kControl);
    EXPECT_TRUE(MayRunOn(Loop::kControl));
    EXPECT_FALSE(MayRunOn(Loop::kResponder));
    EXPECT_FALSE(MayRunOff(Loop::kControl));
    EXPECT_TRUE(MayRunOff(Loop::kResponder));
    {
      BindLoop nested(Loop::kResponder);
      EXPECT_EQ(CurrentLoop(), Loop::kResponder);
    }
    EXPECT_EQ(CurrentLoop(), Loop::kControl);
  }
  EXPECT_EQ(CurrentLoop(), Loop::kNone);
}

TEST(LoopRoleTest, TheBindingIsPerThread) {
  BindLoop bind(Loop::kResponder);
  Loop other = Loop::kProbe;
  std::thread([&] { other = CurrentLoop(); }).join();
  EXPECT_EQ(other, Loop::kNone);
  EXPECT_EQ(CurrentLoop(), Loop::kResponder);
}

TEST(LoopRoleDeathTest, AViolationNamesTheFunctionAndBothLoops) {
  EXPECT_DEATH(
      {
        BindLoop bind(Loop::kResponder);
        LoopViolation("Serialize", Loop::kResponder, true);
      },
      "Serialize runs on the responder loop, must never run on the responder");
}

void SerializeLikeWork() { PODNET_DCHECK_NOT_LOOP(kResponder); }
void ResponderHandler() { PODNET_DCHECK_LOOP(kResponder); }

TEST(LoopRoleDeathTest, DebugChecksAbortOnTheWrongLoopOnly) {
  {
    BindLoop bind(Loop::kControl);
    SerializeLikeWork();  // allowed: not the responder loop
  }
  {
    BindLoop bind(Loop::kResponder);
    ResponderHandler();  // allowed: its own loop
  }
  ResponderHandler();  // an unbound thread (a test's loop) passes
  EXPECT_DEATH(
      {
        BindLoop bind(Loop::kResponder);
        SerializeLikeWork();
      },
      "SerializeLikeWork runs on the responder loop, must never run on the responder");
  EXPECT_DEATH(
      {
        BindLoop bind(Loop::kControl);
        ResponderHandler();
      },
      "ResponderHandler runs on the control loop, claims the responder");
}

}  // namespace
}  // namespace podnet::runtime
