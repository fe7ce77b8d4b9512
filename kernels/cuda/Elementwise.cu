//===- Elementwise.cu - add, SwiGLU, fill and scale on the device ---------===//
//
// Implements the math stated in kernels/Elementwise.h, element for element
// as cpu/Elementwise.cpp does it.
//
// Launch shape: a 1-D grid-stride grid of 256-thread blocks (at most
// kMaxBlocks). When every view is aligned to 4 elements a thread owns 4
// consecutive elements per step, read and written as one 16-byte (f32) or
// 8-byte (bf16) vector; the last numel % 4 elements, or every element of an
// unaligned call, go one per thread. Bound: DRAM bandwidth, numel times the
// summed element sizes of the views.
//
// Each thread loads an element's inputs before it stores its outputs, so
// outputs may alias inputs (in-place gradient accumulation).
//
//===----------------------------------------------------------------------===//

#include "kernels/Elementwise.h"
#include "kernels/cuda/ElementAccess.cuh"
#include "kernels/cuda/Launch.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <initializer_list>
#include <string>

namespace sharc::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;
constexpr int kVec = 4;

__device__ __forceinline__ float sigmoid(float value) {
  return 1.0f / (1.0f + expf(-value));
}

/// Calls op.template apply<kVec>(i) for the vectorEnd / kVec aligned groups
/// and op.template apply<1>(i) for the elements after them.
template <typename Op>
__device__ __forceinline__ void forEachElement(const Op &op, int64_t numel,
                                               int64_t vectorEnd) {
  int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = first * kVec; i < vectorEnd; i += stride * kVec)
    op.template apply<kVec>(i);
  for (int64_t i = vectorEnd + first; i < numel; i += stride)
    op.template apply<1>(i);
}

struct AddOp {
  ConstTensorView a, b;
  TensorView y;
  template <int N> __device__ void apply(int64_t i) const {
    float aValues[N], bValues[N], yValues[N];
    loadN(a, i, aValues);
    loadN(b, i, bValues);
#pragma unroll
    for (int k = 0; k < N; ++k)
      yValues[k] = aValues[k] + bValues[k];
    storeN(y, i, yValues);
  }
};

// Packed calls (the fused gate/up output read in place) map y's element to
// its row in gate and up; a vector of kVec never crosses a row, as
// vectorEnd is 0 unless width is a multiple of kVec.
struct SwigluOp {
  ConstTensorView gate, up;
  TensorView y;
  int64_t width, packedStride;
  template <int N> __device__ void apply(int64_t i) const {
    float gates[N], ups[N], ys[N];
    int64_t source = swigluSource(i, width, packedStride);
    loadN(gate, source, gates);
    loadN(up, source, ups);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      float silu = gates[k] * sigmoid(gates[k]);
      ys[k] = silu * ups[k];
    }
    storeN(y, i, ys);
  }
};

struct SwigluGradOp {
  ConstTensorView gate, up, dy;
  TensorView dgate, dup;
  int64_t width, packedStride;
  template <int N> __device__ void apply(int64_t i) const {
    float gates[N], ups[N], dys[N], dgates[N], dups[N];
    int64_t source = swigluSource(i, width, packedStride);
    loadN(gate, source, gates);
    loadN(up, source, ups);
    loadN(dy, i, dys);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      float sig = sigmoid(gates[k]);
      dgates[k] = dys[k] * ups[k] * sig * (1.0f + gates[k] * (1.0f - sig));
      dups[k] = dys[k] * (gates[k] * sig);
    }
    storeN(dup, source, dups);
    storeN(dgate, source, dgates);
  }
};

struct ScaleOp {
  ConstTensorView x;
  TensorView y;
  float factor;
  template <int N> __device__ void apply(int64_t i) const {
    float values[N];
    loadN(x, i, values);
#pragma unroll
    for (int k = 0; k < N; ++k)
      values[k] = factor * values[k];
    storeN(y, i, values);
  }
};

__global__ void addKernel(AddOp op, int64_t numel, int64_t vectorEnd) {
  forEachElement(op, numel, vectorEnd);
}

__global__ void swigluKernel(SwigluOp op, int64_t numel, int64_t vectorEnd) {
  forEachElement(op, numel, vectorEnd);
}

__global__ void swigluGradKernel(SwigluGradOp op, int64_t numel,
                                 int64_t vectorEnd) {
  forEachElement(op, numel, vectorEnd);
}

__global__ void scaleKernel(ScaleOp op, int64_t numel, int64_t vectorEnd) {
  forEachElement(op, numel, vectorEnd);
}

/// Writes one precomputed storage word (the bits cpu::fill stores) to every
/// element.
template <typename Word>
__global__ void fillKernel(Word *out, int64_t numel, Word bits) {
  int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = first; i < numel; i += stride)
    out[i] = bits;
}

/// A packed call needs rows at least as long as y's.
Status checkPacked(const char *kernel, int64_t width, int64_t packedStride) {
  if (packedStride != 0 && (width <= 0 || packedStride < width))
    return Status::invalidInput(std::string(kernel) + ": packed rows of " +
                                std::to_string(packedStride) +
                                " elements cannot hold " +
                                std::to_string(width));
  return Status::ok();
}

/// Whether kVec consecutive elements of y stay in one row of the packed
/// views (always, for contiguous calls).
bool rowsVectorise(int64_t width, int64_t packedStride) {
  return packedStride == 0 || (width % kVec == 0 && packedStride % kVec == 0);
}

bool isVectorAligned(const void *data, DType dtype) {
  return reinterpret_cast<uintptr_t>(data) % (kVec * dtypeSize(dtype)) == 0;
}

/// End of the vectorised prefix: numel rounded down to kVec when every view
/// is aligned, else 0.
int64_t vectorEndFor(int64_t numel,
                     std::initializer_list<ConstTensorView> views) {
  for (ConstTensorView view : views)
    if (!isVectorAligned(view.data, view.dtype))
      return 0;
  return numel / kVec * kVec;
}

unsigned gridFor(int64_t numWork) {
  return static_cast<unsigned>(
      std::min(ceilDiv(numWork, kThreads), kMaxBlocks));
}

/// Threads needed: one per kVec group plus one per tail element.
unsigned gridFor(int64_t numel, int64_t vectorEnd) {
  return gridFor(vectorEnd / kVec + (numel - vectorEnd));
}

/// Each thread counts its elements; one atomic per thread with any.
__global__ void countNonFiniteKernel(ConstTensorView x, int64_t numel,
                                     unsigned long long *count) {
  unsigned long long mine = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < numel; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    mine += isfinite(loadAs(x, i)) ? 0 : 1;
  if (mine)
    atomicAdd(count, mine);
}

} // namespace

Status add(const AddArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("addKernel",
                              {args.a.dtype, args.b.dtype, args.y.dtype}));
  if (args.numel <= 0)
    return Status::ok();
  int64_t vectorEnd = vectorEndFor(args.numel, {args.a, args.b, args.y});
  addKernel<<<gridFor(args.numel, vectorEnd), kThreads, 0, stream>>>(
      {args.a, args.b, args.y}, args.numel, vectorEnd);
  return launchStatus("addKernel");
}

Status swiglu(const SwigluArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("swigluKernel",
                              {args.gate.dtype, args.up.dtype, args.y.dtype}));
  if (args.numel <= 0)
    return Status::ok();
  SHARC_TRY(checkPacked("swigluKernel", args.width, args.packedStride));
  int64_t vectorEnd =
      rowsVectorise(args.width, args.packedStride)
          ? vectorEndFor(args.numel, {args.gate, args.up, args.y})
          : 0;
  swigluKernel<<<gridFor(args.numel, vectorEnd), kThreads, 0, stream>>>(
      {args.gate, args.up, args.y, args.width, args.packedStride}, args.numel,
      vectorEnd);
  return launchStatus("swigluKernel");
}

Status swigluGrad(const SwigluGradArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("swigluGradKernel",
                              {args.gate.dtype, args.up.dtype, args.dy.dtype,
                               args.dgate.dtype, args.dup.dtype}));
  if (args.numel <= 0)
    return Status::ok();
  SHARC_TRY(checkPacked("swigluGradKernel", args.width, args.packedStride));
  int64_t vectorEnd =
      rowsVectorise(args.width, args.packedStride)
          ? vectorEndFor(args.numel,
                         {args.gate, args.up, args.dy, args.dgate, args.dup})
          : 0;
  swigluGradKernel<<<gridFor(args.numel, vectorEnd), kThreads, 0, stream>>>(
      {args.gate, args.up, args.dy, args.dgate, args.dup, args.width,
       args.packedStride},
      args.numel, vectorEnd);
  return launchStatus("swigluGradKernel");
}

Status fill(const FillArgs &args, DeviceStream stream) {
  DType dtype = args.out.dtype;
  if (dtype == DType::F64)
    return Status::invalidInput("fillKernel: f64 storage is not supported on "
                                "the device (expected f32, bf16 or i32)");
  if (args.numel <= 0)
    return Status::ok();
  // storeElement gives the exact bits cpu::fill stores, i32 included.
  uint32_t bits = 0;
  storeElement({&bits, dtype}, 0, args.value);
  if (dtype == DType::BF16)
    fillKernel<<<gridFor(args.numel), kThreads, 0, stream>>>(
        static_cast<uint16_t *>(args.out.data), args.numel,
        static_cast<uint16_t>(bits));
  else
    fillKernel<<<gridFor(args.numel), kThreads, 0, stream>>>(
        static_cast<uint32_t *>(args.out.data), args.numel, bits);
  return launchStatus("fillKernel");
}

Status scale(const ScaleArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("scaleKernel", {args.x.dtype, args.y.dtype}));
  if (args.numel <= 0)
    return Status::ok();
  int64_t vectorEnd = vectorEndFor(args.numel, {args.x, args.y});
  scaleKernel<<<gridFor(args.numel, vectorEnd), kThreads, 0, stream>>>(
      {args.x, args.y, static_cast<float>(args.factor)}, args.numel, vectorEnd);
  return launchStatus("scaleKernel");
}

Status countNonFinite(ConstTensorView x, int64_t numel,
                      unsigned long long *deviceCount, DeviceStream stream) {
  if (x.dtype != DType::F32 && x.dtype != DType::BF16)
    return Status::invalidInput(std::string("countNonFiniteKernel: ") +
                                dtypeName(x.dtype) + " storage");
  if (numel <= 0)
    return Status::ok();
  auto blocks =
      static_cast<unsigned>(std::min<int64_t>(ceilDiv(numel, 256), 1024));
  countNonFiniteKernel<<<blocks, 256, 0, stream>>>(x, numel, deviceCount);
  return launchStatus("countNonFiniteKernel");
}

} // namespace sharc::kernels::cuda
