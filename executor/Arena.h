//===- Arena.h - the per-rank memory regions of a plan ----------*- C++ -*-===//
// defines: Arena
//
// Every region of Plan::regionBytes is allocated once per rank at set-up,
// 64-byte aligned; a buffer is its region's base plus its planned offset,
// so a step never allocates. Parameter, optimizer-state, input and output
// regions start zeroed; with `poison` the activation region is filled with
// NaN bytes, so a kernel that reads a temporary nobody wrote shows up as a
// NaN loss instead of a plausible number.
//
//   auto arena = Arena::create(plan.regionBytes, /*poison=*/true);
//   float *x = static_cast<float *>(arena->at(plan.buffers[3]));
//   arena->poisonActivations(); // before a step, in checking mode
#pragma once

#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

#include <cstddef>
#include <map>
#include <memory>

namespace sharc::exec {

class Arena {
public:
  static constexpr int64_t kAlignment = 64;

  static Result<Arena> create(const std::map<plan::Region, int64_t> &sizes,
                              bool poison);

  /// Base of a region; null for a region of zero bytes.
  std::byte *base(plan::Region region) const;
  int64_t numBytes(plan::Region region) const;
  /// The storage of a buffer. The caller checked the buffer fits (the
  /// runtime validates every buffer against its region at set-up).
  void *at(const plan::Buffer &buffer) const {
    return base(buffer.region) + buffer.offset;
  }
  void poisonActivations();
  void zero(plan::Region region);

private:
  struct FreeDeleter {
    void operator()(std::byte *ptr) const;
  };
  struct Block {
    std::unique_ptr<std::byte, FreeDeleter> memory;
    int64_t numBytes = 0;
  };
  std::map<plan::Region, Block> blocks_;
};

} // namespace sharc::exec
