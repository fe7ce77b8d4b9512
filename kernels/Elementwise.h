//===- Elementwise.h - add, SwiGLU, fill and scale --------------*- C++ -*-===//
// defines: AddArgs, SwigluArgs, SwigluGradArgs, FillArgs, ScaleArgs, add,
//          swiglu, swigluGrad, fill, scale, countNonFinite (cpu::, cuda::)
//
//   add:    y = a + b                       (also gradient accumulation)
//   swiglu: y = silu(g) * u,  silu(g) = g * sigmoid(g)
//   grad:   du = dy * silu(g)
//           dg = dy * u * sigmoid(g) * (1 + g * (1 - sigmoid(g)))
//   packed: gate and up are the two halves of each row of one [.., 2 * width]
//           tensor (the fused gate/up GEMM's output, read in place), and so
//           are dgate and dup: element i of y is gate[map(i)], up[map(i)]
//           with map(i) = i + (i / width) * (packedStride - width), where
//           packedStride (2 * width) is the row length of the packed tensor.
//           packedStride == 0: every view is contiguous like y.
//   fill:   y = value                       (the loss seed 1.0)
//   scale:  y = float(factor) * x
// Element counts are numel; math in fp32 (double for F64), rounded on store.
// countNonFinite (a checking aid, sharc-run --check): how many of x's numel
// float elements are NaN or infinite; the device version adds them to a
// device counter the caller zeroed.
#pragma once

#include "kernels/HostDevice.h"
#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

namespace sharc::kernels {

struct AddArgs {
  ConstTensorView a, b;
  TensorView y;
  int64_t numel = 0;
};

struct SwigluArgs {
  ConstTensorView gate, up;
  TensorView y;
  int64_t numel = 0;
  int64_t width = 0;        ///< y's last dimension (packed calls)
  int64_t packedStride = 0; ///< gate/up row length; 0: contiguous like y
};

struct SwigluGradArgs {
  ConstTensorView gate, up, dy;
  TensorView dgate, dup;
  int64_t numel = 0;
  int64_t width = 0;        ///< dy's last dimension (packed calls)
  int64_t packedStride = 0; ///< gate/up/dgate/dup row length; 0: like dy
};

/// Where element `i` of y (or dy) sits in gate, up, dgate and dup.
SHARC_HOST_DEVICE inline int64_t swigluSource(int64_t i, int64_t width,
                                              int64_t packedStride) {
  return packedStride == 0 ? i : i + (i / width) * (packedStride - width);
}

struct FillArgs {
  TensorView out;
  int64_t numel = 0;
  double value = 0.0;
};

struct ScaleArgs {
  ConstTensorView x;
  TensorView y;
  int64_t numel = 0;
  double factor = 1.0;
};

namespace cpu {
void add(const AddArgs &args);
void fill(const FillArgs &args);
void scale(const ScaleArgs &args);
void swiglu(const SwigluArgs &args);
void swigluGrad(const SwigluGradArgs &args);
int64_t countNonFinite(ConstTensorView x, int64_t numel);
} // namespace cpu

namespace cuda {
Status add(const AddArgs &args, DeviceStream stream);
Status fill(const FillArgs &args, DeviceStream stream);
Status scale(const ScaleArgs &args, DeviceStream stream);
Status swiglu(const SwigluArgs &args, DeviceStream stream);
Status swigluGrad(const SwigluGradArgs &args, DeviceStream stream);
Status countNonFinite(ConstTensorView x, int64_t numel,
                      unsigned long long *deviceCount, DeviceStream stream);
} // namespace cuda

} // namespace sharc::kernels
