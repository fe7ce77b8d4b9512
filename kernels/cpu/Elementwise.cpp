//===- Elementwise.cpp - add, SwiGLU, fill and scale on the cpu -----------===//
//
// Implements the math stated in kernels/Elementwise.h. Every element's
// inputs are loaded before its outputs are stored, so outputs may alias
// inputs (in-place gradient accumulation).
//
//===----------------------------------------------------------------------===//

#include "kernels/Elementwise.h"

#include <cmath>

namespace sharc::kernels::cpu {
namespace {

template <typename Acc> Acc load(ConstTensorView view, int64_t index) {
  return static_cast<Acc>(loadElement(view, index));
}

template <typename Acc> Acc sigmoid(Acc value) {
  return Acc(1) / (Acc(1) + std::exp(-value));
}

template <typename Acc> void addImpl(const AddArgs &args) {
  for (int64_t i = 0; i < args.numel; ++i)
    storeElement(args.y, i, load<Acc>(args.a, i) + load<Acc>(args.b, i));
}

template <typename Acc> void swigluImpl(const SwigluArgs &args) {
  for (int64_t i = 0; i < args.numel; ++i) {
    int64_t source = swigluSource(i, args.width, args.packedStride);
    Acc gate = load<Acc>(args.gate, source);
    Acc silu = gate * sigmoid(gate);
    storeElement(args.y, i, silu * load<Acc>(args.up, source));
  }
}

template <typename Acc> void swigluGradImpl(const SwigluGradArgs &args) {
  for (int64_t i = 0; i < args.numel; ++i) {
    int64_t source = swigluSource(i, args.width, args.packedStride);
    Acc gate = load<Acc>(args.gate, source);
    Acc up = load<Acc>(args.up, source);
    Acc dy = load<Acc>(args.dy, i);
    Acc sig = sigmoid(gate);
    Acc dgate = dy * up * sig * (Acc(1) + gate * (Acc(1) - sig));
    storeElement(args.dup, source, dy * (gate * sig));
    storeElement(args.dgate, source, dgate);
  }
}

bool anyF64(ConstTensorView a, ConstTensorView b, ConstTensorView c) {
  return a.dtype == DType::F64 || b.dtype == DType::F64 ||
         c.dtype == DType::F64;
}

} // namespace

void add(const AddArgs &args) {
  if (anyF64(args.a, args.b, args.y))
    addImpl<double>(args);
  else
    addImpl<float>(args);
}

void swiglu(const SwigluArgs &args) {
  if (anyF64(args.gate, args.up, args.y))
    swigluImpl<double>(args);
  else
    swigluImpl<float>(args);
}

void swigluGrad(const SwigluGradArgs &args) {
  if (anyF64(args.gate, args.dy, args.dgate))
    swigluGradImpl<double>(args);
  else
    swigluGradImpl<float>(args);
}

void fill(const FillArgs &args) {
  for (int64_t i = 0; i < args.numel; ++i)
    storeElement(args.out, i, args.value);
}

void scale(const ScaleArgs &args) {
  // fp32 math, as every kernel: the product is rounded to float first.
  float factor = static_cast<float>(args.factor);
  for (int64_t i = 0; i < args.numel; ++i)
    storeElement(args.y, i,
                 factor * static_cast<float>(loadElement(args.x, i)));
}

int64_t countNonFinite(ConstTensorView x, int64_t numel) {
  int64_t count = 0;
  for (int64_t i = 0; i < numel; ++i)
    count += std::isfinite(loadElement(x, i)) ? 0 : 1;
  return count;
}

} // namespace sharc::kernels::cpu
