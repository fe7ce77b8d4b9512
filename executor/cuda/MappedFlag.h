//===- MappedFlag.h - a word kernels set and the host reads -----*- C++ -*-===//
// defines: MappedFlag
//
// One unsigned in pinned host memory mapped into the device's address
// space: kernels set it through the bus at devicePointer(), and the host
// reads it once the streams that ran them have drained, with no copy and
// nothing enqueued, so a step that never sets it pays nothing; a captured
// graph replays with the same address. The rank's AdamW non-finite flag
// (kernels/AdamW.h, RankDevice::takeNonFiniteUpdate).
//
//   MappedFlag flag;
//   SHARC_TRY(flag.allocate());            // on the rank's device
//   args.nonFinite = flag.devicePointer(); // ... launch, drain the streams
//   bool set = flag.take();                // and clear it
#pragma once

#include "planner/plan/Status.h"

namespace sharc::exec {

class MappedFlag {
public:
  MappedFlag() = default;
  ~MappedFlag();
  MappedFlag(const MappedFlag &) = delete;
  MappedFlag &operator=(const MappedFlag &) = delete;

  /// Allocates the word, cleared, for the current device.
  Status allocate();
  unsigned *devicePointer() const { return device_; }
  /// Whether a kernel set it since the last call, clearing it.
  bool take();

private:
  volatile unsigned *host_ = nullptr;
  unsigned *device_ = nullptr;
};

} // namespace sharc::exec
