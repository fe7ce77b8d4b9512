//===- Elementwise.h - add and SwiGLU ---------------------------*- C++ -*-===//
// defines: AddArgs, SwigluArgs, SwigluGradArgs, add, swiglu, swigluGrad
//          (cpu::)
//
//   add:    y = a + b                       (also gradient accumulation)
//   swiglu: y = silu(g) * u,  silu(g) = g * sigmoid(g)
//   grad:   du = dy * silu(g)
//           dg = dy * u * sigmoid(g) * (1 + g * (1 - sigmoid(g)))
// Element counts are numel; math in fp32 (double for F64), rounded on store.
#pragma once

#include "kernels/TensorView.h"

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

namespace cpu {
void add(const AddArgs &args);
void swiglu(const SwigluArgs &args);
void swigluGrad(const SwigluGradArgs &args);
} // namespace cpu

} // namespace sharc::kernels
