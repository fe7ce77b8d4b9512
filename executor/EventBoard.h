//===- EventBoard.h - one rank's events between its streams -----*- C++ -*-===//
// defines: EventBoard
//
// The events of one rank for one step: a stream signals an event when an
// instruction finishes and another stream's instruction waits for it before
// starting. An event once signalled stays signalled until reset() starts the
// next step. Every wait has a deadline (the collectives' timeout) so that a
// plan that cannot finish fails with a message instead of hanging, and
// abort() wakes every waiter when another stream or rank has failed.
//
//   EventBoard events(plan.numEvents);
//   events.reset();                                  // before every step
//   SHARC_TRY(events.wait(/*event=*/3, /*timeoutSeconds=*/60));
//   events.signal(4);
#pragma once

#include "planner/plan/Status.h"

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace sharc::exec {

class EventBoard {
public:
  explicit EventBoard(int64_t numEvents);

  /// Clears every event and a previous abort; only while nobody waits.
  void reset();
  void signal(int64_t event);
  /// Returns once `event` is signalled; a runtimeError "waited N s for
  /// event E" after the deadline, or at once after abort().
  Status wait(int64_t event, double timeoutSeconds);
  void abort();

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<bool> isSignalled_;
  bool isAborted_ = false;
};

} // namespace sharc::exec
