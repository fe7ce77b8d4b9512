//===- Copy.h - strided block copies ----------------------------*- C++ -*-===//
// defines: Copy2dArgs, copy2d (cpu::, cuda::)
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

namespace sharc::kernels {

struct Copy2dArgs {
  const void *src = nullptr;
  void *dst = nullptr;
  int64_t rows = 0, rowBytes = 0, srcPitch = 0, dstPitch = 0;
};

namespace cpu {
void copy2d(const Copy2dArgs &args);
} // namespace cpu

namespace cuda {
Status copy2d(const Copy2dArgs &args, DeviceStream stream);
} // namespace cuda

} // namespace sharc::kernels
