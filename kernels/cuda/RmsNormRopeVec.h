//===- RmsNormRopeVec.h - norm + rope's vector path -------------*- C++ -*-===//
// defines: rmsNormRopeVec, rmsNormRopeGradVec (cuda::)
//
// RmsNormRope.cu's fast path (RmsNormRopeVec.cu): each function launches
// only where the views fit it and says whether it did, so the caller falls
// back to the generic kernels otherwise.
#pragma once

#include "kernels/RmsNormRope.h"

#include <cstdint>

namespace sharc::kernels::cuda {

/// The forward on the vector path, if the views fit it.
bool rmsNormRopeVec(const RmsNormRopeArgs &args, DeviceStream stream);
/// The backward's dx and `blocks` partial dw rows (args.scratch) on the
/// vector path, if the views fit it; the caller sums the rows.
bool rmsNormRopeGradVec(const RmsNormRopeGradArgs &args, int64_t blocks,
                        DeviceStream stream);

} // namespace sharc::kernels::cuda
