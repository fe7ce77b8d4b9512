//===- RmsNormRopeVec.h - norm + rope's vector path -------------*- C++ -*-===//
// defines: rmsNormRopeVec, rmsNormRopeGradVec, HeadRows, headRows (cuda::)
//
// RmsNormRope.cu's fast path (RmsNormRopeVec.cu): each function launches
// only where the views fit it and says whether it did, so the caller falls
// back to the generic kernels otherwise.
#pragma once

#include "kernels/RmsNormRope.h"

#include <cstdint>

namespace sharc::kernels::cuda {

/// Where a head starts in an [S, B, numHeads * headDim] tensor whose
/// [s, b] rows are `pitch` elements apart (kernels/RmsNormRope.h's
/// headStart, with 32-bit head arithmetic for the kernels).
struct HeadRows {
  int numHeads;
  int64_t batch;
  int64_t pitch; ///< resolved: numHeads * headDim where packed
  SHARC_HOST_DEVICE int64_t at(int64_t s, int unit, int headDim) const {
    return (s * batch + unit / numHeads) * pitch +
           static_cast<int64_t>(unit % numHeads) * headDim;
  }
};

inline HeadRows headRows(int64_t numHeads, int64_t batch, int64_t headDim,
                         int64_t pitch) {
  return {static_cast<int>(numHeads), batch,
          pitch > 0 ? pitch : numHeads * headDim};
}

/// The forward on the vector path, if the views fit it.
bool rmsNormRopeVec(const RmsNormRopeArgs &args, DeviceStream stream);
/// The backward's dx and `blocks` partial dw rows (args.scratch) on the
/// vector path, if the views fit it; the caller sums the rows.
bool rmsNormRopeGradVec(const RmsNormRopeGradArgs &args, int64_t blocks,
                        DeviceStream stream);

} // namespace sharc::kernels::cuda
