//===- RmsNormRope.h - per-head RMSNorm fused with rope ---------*- C++ -*-===//
// defines: HeadRows, headRows, RmsNormRopeArgs, RmsNormRopeGradArgs,
//          rmsNormRope, rmsNormRopeGrad (cpu::, cuda::),
//          rmsNormRopeGradScratchBytes (cuda::), rmsNormRopeGradBlocks
//
// x is [seqLen, batch, numHeads * headDim] (sequence first), w [headDim].
// Each head is kernels/RmsNorm.h's group (groupSize = headDim) and the
// normalised, scaled head is rotated as kernels/Rope.h states, at position
// p = positions().at(s) (s + positionOffset, or Rope.h's two runs),
// without storing the value in between:
//   z = (x * rstd) * w,   y = R(p) z
// Backward, with g = R(-p) dy (rope's backward) and xhat = x * rstd:
//   dx[c] = rstd * (g[c] w[c] - xhat[c] * mean_c'(g w xhat))
//   dw[c] = sum over rows and heads of g[c] * xhat[c]
// On f32 storage this is rms_norm then rope (and rope_grad then
// rms_norm_grad) bit for bit on the cpu; on bf16 z and g keep fp32. dw is
// overwritten. On the device dw needs rmsNormRopeGradScratchBytes(args) of
// scratch: fp32 partial rows over a partition fixed by the sizes, so dw is
// the same bits on every run.
//
// x (and dx) may be columns of a wider tensor (the fused q/k/v
// projection's output): xPitch (dxPitch) elements from one [s, b] row to
// the next, 0 meaning packed (numHeads * headDim); y and dy are packed.
#pragma once

#include "kernels/HostDevice.h"
#include "kernels/SequencePositions.h"
#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

namespace sharc::kernels {

/// Where a head starts in an [S, B, numHeads * headDim] tensor whose
/// [s, b] rows are `pitch` elements apart: head `unit` (b * numHeads + h)
/// of position s at at(s, unit, headDim). The head count is 32-bit, as
/// the device kernels' head arithmetic is.
struct HeadRows {
  int numHeads;
  int64_t batch;
  int64_t pitch; ///< resolved: numHeads * headDim where packed
  SHARC_HOST_DEVICE int64_t at(int64_t s, int unit, int headDim) const {
    return (s * batch + unit / numHeads) * pitch +
           static_cast<int64_t>(unit % numHeads) * headDim;
  }
};

/// The HeadRows of a tensor whose rows are `pitch` elements apart (0:
/// packed, numHeads * headDim).
inline HeadRows headRows(int64_t numHeads, int64_t batch, int64_t headDim,
                         int64_t pitch) {
  return {static_cast<int>(numHeads), batch,
          pitch > 0 ? pitch : numHeads * headDim};
}

struct RmsNormRopeArgs {
  ConstTensorView x, w;
  TensorView y;
  int64_t seqLen = 0, batch = 0, numHeads = 0, headDim = 0;
  int64_t xPitch = 0; ///< see above; 0: packed
  int64_t positionOffset = 0;
  int64_t secondRow = 0, secondStart = 0; ///< kernels/SequencePositions.h
  double eps = 1e-6, theta = 1e6;
  RowPositions positions() const {
    return {positionOffset, secondRow, secondStart};
  }
};

struct RmsNormRopeGradArgs {
  ConstTensorView x, w, dy;
  TensorView dx, dw;
  int64_t seqLen = 0, batch = 0, numHeads = 0, headDim = 0;
  int64_t xPitch = 0, dxPitch = 0; ///< see above; 0: packed
  int64_t positionOffset = 0;
  int64_t secondRow = 0, secondStart = 0; ///< kernels/SequencePositions.h
  double eps = 1e-6, theta = 1e6;
  void *scratch = nullptr; ///< device only, of rmsNormRopeGradScratchBytes
  RowPositions positions() const {
    return {positionOffset, secondRow, secondStart};
  }
};

/// The device backward's partition: tiles of kRmsNormRopeGradUnits heads
/// at one position, kRmsNormRopeWarps per block, at most
/// kRmsNormRopeGradMaxBlocks blocks (three per SM of an H200 at the
/// kernel's 80 registers, one wave); each block leaves one partial dw row, so
/// the scratch is this many rows of headDim floats (what
/// plan/DeviceWorkspace.h predicts). Fixed by the sizes alone.
inline constexpr int64_t kRmsNormRopeGradUnits = 2;
inline constexpr int64_t kRmsNormRopeWarps = 8;
inline constexpr int64_t kRmsNormRopeGradMaxBlocks = 384;
inline int64_t rmsNormRopeGradBlocks(int64_t seqLen, int64_t headsPerPosition) {
  if (seqLen <= 0 || headsPerPosition <= 0)
    return 0;
  int64_t tiles = seqLen * ((headsPerPosition + kRmsNormRopeGradUnits - 1) /
                            kRmsNormRopeGradUnits);
  int64_t blocks = (tiles + kRmsNormRopeWarps - 1) / kRmsNormRopeWarps;
  return blocks < kRmsNormRopeGradMaxBlocks ? blocks
                                            : kRmsNormRopeGradMaxBlocks;
}

namespace cpu {
void rmsNormRope(const RmsNormRopeArgs &args);
void rmsNormRopeGrad(const RmsNormRopeGradArgs &args);
} // namespace cpu

namespace cuda {
Status rmsNormRope(const RmsNormRopeArgs &args, DeviceStream stream);
Status rmsNormRopeGrad(const RmsNormRopeGradArgs &args, DeviceStream stream);
/// Scratch bytes rmsNormRopeGrad needs; depends on the sizes only.
int64_t rmsNormRopeGradScratchBytes(const RmsNormRopeGradArgs &args);
} // namespace cuda

} // namespace sharc::kernels
