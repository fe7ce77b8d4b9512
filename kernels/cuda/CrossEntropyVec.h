//===- CrossEntropyVec.h - cross entropy's vector path ----------*- C++ -*-===//
// defines: crossEntropyVec, crossEntropyGradVec (cuda::)
//
// CrossEntropy.cu's fast path (CrossEntropyVec.cu): each function launches
// only where the views fit it and says whether it did, so the caller falls
// back to the generic kernels otherwise.
#pragma once

#include "kernels/CrossEntropy.h"

#include <cstdint>

namespace sharc::kernels::cuda {

/// Each row's loss term (lse - x[label], 0 for an ignored row) into
/// rowLoss, if the logits fit the vector path.
bool crossEntropyVec(const CrossEntropyArgs &args, float *rowLoss,
                     DeviceStream stream);
/// dlogits on at most maxBlocks blocks, if the views fit the vector path.
bool crossEntropyGradVec(const CrossEntropyGradArgs &args, int64_t maxBlocks,
                         DeviceStream stream);

} // namespace sharc::kernels::cuda
