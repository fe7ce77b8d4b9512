//===- EventBoard.cpp - one rank's events between its streams -------------===//

#include "executor/EventBoard.h"

#include "executor/Deadline.h"

#include <chrono>
#include <cstdio>
#include <string>

namespace sharc::exec {

EventBoard::EventBoard(int64_t numEvents)
    : isSignalled_(static_cast<size_t>(numEvents), false) {}

void EventBoard::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  isSignalled_.assign(isSignalled_.size(), false);
  isAborted_ = false;
}

void EventBoard::signal(int64_t event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    isSignalled_[event] = true;
  }
  changed_.notify_all();
}

void EventBoard::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    isAborted_ = true;
  }
  changed_.notify_all();
}

Status EventBoard::wait(int64_t event, double timeoutSeconds) {
  auto deadline = deadlineAfter(timeoutSeconds);
  std::unique_lock<std::mutex> lock(mutex_);
  bool woken = changed_.wait_until(
      lock, deadline, [&] { return isSignalled_[event] || isAborted_; });
  if (isSignalled_[event])
    return Status::ok();
  if (woken)
    return Status::runtimeError("aborted while waiting for event " +
                                std::to_string(event) +
                                ": another stream or rank failed");
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", timeoutSeconds);
  return Status::runtimeError(std::string("waited ") + seconds +
                              " s for event " + std::to_string(event));
}

} // namespace sharc::exec
