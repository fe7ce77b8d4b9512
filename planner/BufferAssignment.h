//===- BufferAssignment.h - offsets of buffers in one arena -----*- C++ -*-===//
// defines: BufferRequest, BufferAssignment, assignBuffers, SlabLayout,
//          layoutSlab
//
// Places buffers with known lifetimes (inclusive schedule steps) at offsets in
// one arena so that buffers live at the same step never share a byte, using
// XLA's heap simulator's "global decreasing size best fit": largest first
// (ties: earlier first step, then lower id), each at the smallest gap left by
// the already placed buffers whose lifetimes overlap it, else on top of them.
// Sizes are rounded up to the alignment; zero-byte buffers get offset 0 and
// occupy nothing. Plain records only: the IR layer builds the requests.
//
//   std::vector<BufferRequest> requests = {
//       {.id = 0, .numBytes = 32, .firstStep = 0, .lastStep = 1},  // a
//       {.id = 1, .numBytes = 64, .firstStep = 0, .lastStep = 5},  // b
//       {.id = 2, .numBytes = 32, .firstStep = 2, .lastStep = 5}}; // c
//   BufferAssignment result = assignBuffers(requests, /*alignment=*/32);
//   // b at 0, a at 64, c reuses a's bytes at 64; peakBytes == 96.
//
// A slab is buffers placed side by side as one request: its members' offsets
// come from layoutSlab, and its request lives from the first member's first
// step to the last member's last step.
//
//   SlabLayout slab = layoutSlab({48, 32}, /*alignment=*/32); // 0, 64; 96 B
#pragma once

#include <cstdint>
#include <vector>

namespace sharc {

struct BufferRequest {
  int64_t id = 0; ///< breaks ties between equal sizes and first steps
  int64_t numBytes = 0;
  int64_t firstStep = 0; ///< the step that writes it
  int64_t lastStep = 0;  ///< the last step that reads it (inclusive)
};

struct BufferAssignment {
  std::vector<int64_t> offsets; ///< per request index, aligned
  int64_t peakBytes = 0;        ///< the arena size the offsets need
  /// A lower bound on peakBytes: the largest total of aligned sizes live
  /// at one step. peakBytes / maxLiveBytes measures fragmentation.
  int64_t maxLiveBytes = 0;
};

/// Requests need numBytes >= 0 and firstStep <= lastStep; alignment is
/// clamped to at least 1.
BufferAssignment assignBuffers(const std::vector<BufferRequest> &requests,
                               int64_t alignment = 256);

/// Where members sit inside one slab (a data-parallel gradient bucket that
/// one collective call reduces in place).
struct SlabLayout {
  std::vector<int64_t> offsets; ///< per member, from the slab's start
  int64_t numBytes = 0;         ///< the slab's size, a multiple of alignment
};

/// Lays members out in the given order, each at the next aligned offset, so
/// that the kernel writing a member gets an aligned pointer as it would in
/// a buffer of its own; alignment is clamped to at least 1.
SlabLayout layoutSlab(const std::vector<int64_t> &memberBytes,
                      int64_t alignment = 256);

} // namespace sharc
