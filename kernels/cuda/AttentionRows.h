//===- AttentionRows.h - rows of a blocked attention's results --*- C++ -*-===//
// defines: addBf16Rows, fillFloatRows (cuda::)
//
// cuDNN's SDPA computes a query block's dk and dv over the key prefix its
// queries see, and overwrites them. The balanced split's two query runs see
// two prefixes of one K/V (kernels/cuda/CudnnAttention.cpp), so the first
// run's gradients go to a packed staging tensor and are added into the
// second's afterwards: dst[r, 0:width] += src[r, 0:width] for rows r <
// rows, bf16 storage, the sum in fp32 rounded once (as cpu::attentionGrad's
// output is). dst's rows are dstPitch elements apart (dv may be columns of
// the fused q/k/v projection's rows), src's are packed.
//
// Queries that see no key of a ring attention block get lse kEmptyRowLse
// (kernels/Attention.h), which no byte-wise memset writes: fillFloatRows
// sets `width` floats in each of `rows` rows `pitch` floats apart.
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

#include <cstdint>

namespace sharc::kernels::cuda {

Status addBf16Rows(void *dst, int64_t dstPitch, const void *src, int64_t rows,
                   int64_t width, DeviceStream stream);

Status fillFloatRows(float *dst, int64_t pitch, int64_t rows, int64_t width,
                     float value, DeviceStream stream);

} // namespace sharc::kernels::cuda
