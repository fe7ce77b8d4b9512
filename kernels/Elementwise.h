//===- Elementwise.h - add, SwiGLU, fill and scale --------------*- C++ -*-===//
// defines: AddArgs, SwigluArgs, SwigluGradArgs, FillArgs, ScaleArgs, add,
//          swiglu, swigluGrad, fill, scale, countNonFinite (cpu::, cuda::)
//
//   add:    y = a + b                       (also gradient accumulation)
//   swiglu: y = silu(g) * u,  silu(g) = g * sigmoid(g)
//   grad:   du = dy * silu(g)
//           dg = dy * u * sigmoid(g) * (1 + g * (1 - sigmoid(g)))
//   fill:   y = value                       (the loss seed 1.0)
//   scale:  y = float(factor) * x
// Element counts are numel; math in fp32 (double for F64), rounded on store.
// countNonFinite (a checking aid, sharc-run --check): how many of x's numel
// float elements are NaN or infinite; the device version adds them to a
// device counter the caller zeroed.
#pragma once

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
};

struct SwigluGradArgs {
  ConstTensorView gate, up, dy;
  TensorView dgate, dup;
  int64_t numel = 0;
};

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
