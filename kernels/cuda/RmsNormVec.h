//===- RmsNormVec.h - RMSNorm's vector path ---------------------*- C++ -*-===//
// defines: kGradBlocks, kDefaultSharedBytes, rmsNormVec, rmsNormGradVec,
//          rmsNormGradVecBlocks, sumPartialRows (cuda::)
//
// RmsNorm.cu's fast path (RmsNormVec.cu): each function launches only where
// the views fit it and says whether (or on how many blocks) it did, so the
// caller falls back to the generic kernels otherwise.
#pragma once

#include "kernels/RmsNorm.h"

#include <cstdint>

namespace sharc::kernels::cuda {

/// The backward's partition: at most kGradBlocks blocks, fixed by the sizes
/// alone, so the partial dw rows (and dw) are the same on every device.
inline constexpr int kGradBlocks = static_cast<int>(kRmsNormGradMaxBlocks);
/// Shared memory a kernel may take without opting in.
inline constexpr int64_t kDefaultSharedBytes = 48 * 1024;

/// dw[c] = the sum over r < numPartials of partials[r * cols + c], in a
/// fixed order (RmsNorm.cu's rmsNormDwKernel); the last step of every
/// norm backward (RmsNormRope.cu's too).
Status sumPartialRows(const float *partials, int64_t numPartials, TensorView dw,
                      int64_t cols, DeviceStream stream);
/// The forward on the vector path, if the views fit it.
bool rmsNormVec(const RmsNormArgs &args, DeviceStream stream);
/// Blocks (partial dw rows) the vector backward would use for these sizes
/// and dtypes; 0 where it does not apply.
int64_t rmsNormGradVecBlocks(const RmsNormGradArgs &args);
/// The backward's dx and per-block dw rows in `partials` on the vector
/// path, if the views fit it: the number of rows left, else 0.
int64_t rmsNormGradVec(const RmsNormGradArgs &args, float *partials,
                       DeviceStream stream);

} // namespace sharc::kernels::cuda
