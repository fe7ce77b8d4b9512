//===- Copy.h - strided block copies ----------------------------*- C++ -*-===//
// defines: Copy2dArgs, copy2d, PermuteBlocksArgs, permuteBlocks (cpu::,
//          cuda::)
//
// rows rows of rowBytes bytes each, row r read at src + r * srcPitch and
// written at dst + r * dstPitch: the layout of one block along a dimension
// of a row-major tensor viewed as [outer, extent, inner] (slice_to_rank,
// replicate, the unpacking of an all_gather along an inner dimension). On
// the device, a kernel of 16-, 8- or 4-byte words on the stream
// (cuda/Copy.cu says why not cudaMemcpy2DAsync).
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <vector>

namespace sharc::kernels {

struct Copy2dArgs {
  const void *src = nullptr;
  void *dst = nullptr;
  int64_t rows = 0, rowBytes = 0, srcPitch = 0, dstPitch = 0;
};

/// permute_blocks: src is order.size() blocks of blockBytes each (dim 0 of a
/// row-major tensor cut into equal blocks); block i of dst is block
/// order[i] of src. src and dst do not overlap. On the device, one
/// cudaMemcpyAsync per block (the balanced split's permutations have no two
/// consecutive blocks to join).
struct PermuteBlocksArgs {
  const void *src = nullptr;
  void *dst = nullptr;
  int64_t blockBytes = 0;
  std::vector<int64_t> order;
};

namespace cpu {
void copy2d(const Copy2dArgs &args);
void permuteBlocks(const PermuteBlocksArgs &args);
} // namespace cpu

namespace cuda {
Status copy2d(const Copy2dArgs &args, DeviceStream stream);
Status permuteBlocks(const PermuteBlocksArgs &args, DeviceStream stream);
} // namespace cuda

} // namespace sharc::kernels
