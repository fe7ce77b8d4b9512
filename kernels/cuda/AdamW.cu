//===- AdamW.cu - decoupled-weight-decay Adam update on the device --------===//
//
// Implements the math stated in kernels/AdamW.h with the arithmetic of
// cpu/AdamW.cpp: the per-step scalars are formed on the host in double and
// rounded once, every device operation is an explicitly rounded fp32 one
// (no fused multiply-add), and p, m and v are rounded to their storage type
// before the final update reads them. f32 results therefore equal the cpu's
// bit for bit.
//
// Launch shape: a 1-D grid-stride grid of 256-thread blocks (at most
// kMaxBlocks). When p, m, v and g are aligned to 4 elements a thread owns 4
// consecutive elements per step, moved as 8- or 16-byte vectors; the last
// numel % 4 elements, or all of an unaligned call, go one per thread. Bound:
// DRAM bandwidth, numel * (2 * (|p| + |m| + |v|) + |g|) bytes.
//
//===----------------------------------------------------------------------===//

#include "kernels/AdamW.h"
#include "kernels/cuda/Launch.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace sharc::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;
constexpr int kVec = 4;

struct alignas(8) Bf16x4 {
  __nv_bfloat16 values[kVec];
};

/// Elements [i, i + N) as float; for N == kVec, i is a multiple of kVec and
/// the data is kVec-element aligned.
template <int N>
__device__ __forceinline__ void loadN(const void *data, DType dtype, int64_t i,
                                      float (&out)[N]) {
  if constexpr (N == 1) {
    out[0] = dtype == DType::BF16
                 ? __bfloat162float(static_cast<const __nv_bfloat16 *>(data)[i])
                 : static_cast<const float *>(data)[i];
  } else if (dtype == DType::BF16) {
    Bf16x4 pack = *reinterpret_cast<const Bf16x4 *>(
        static_cast<const __nv_bfloat16 *>(data) + i);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      out[k] = __bfloat162float(pack.values[k]);
  } else {
    float4 pack =
        *reinterpret_cast<const float4 *>(static_cast<const float *>(data) + i);
    out[0] = pack.x;
    out[1] = pack.y;
    out[2] = pack.z;
    out[3] = pack.w;
  }
}

template <int N>
__device__ __forceinline__ void storeN(void *data, DType dtype, int64_t i,
                                       const float (&in)[N]) {
  if constexpr (N == 1) {
    if (dtype == DType::BF16)
      static_cast<__nv_bfloat16 *>(data)[i] = __float2bfloat16_rn(in[0]);
    else
      static_cast<float *>(data)[i] = in[0];
  } else if (dtype == DType::BF16) {
    Bf16x4 pack;
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      pack.values[k] = __float2bfloat16_rn(in[k]);
    *reinterpret_cast<Bf16x4 *>(static_cast<__nv_bfloat16 *>(data) + i) = pack;
  } else {
    *reinterpret_cast<float4 *>(static_cast<float *>(data) + i) =
        make_float4(in[0], in[1], in[2], in[3]);
  }
}

/// The value `value` takes after a store to `dtype` and a load back.
__device__ __forceinline__ float roundTo(DType dtype, float value) {
  if (dtype == DType::BF16)
    return __bfloat162float(__float2bfloat16_rn(value));
  return value;
}

/// The step's scalars, each rounded once from double as the cpu forms them.
using AdamWScalars = AdamWStepScalars;

struct AdamWViews {
  void *param, *m, *v;
  const void *grad;
  DType paramType, mType, vType, gradType;
};

template <int N>
__device__ __forceinline__ void
updateElements(const AdamWViews &views, const AdamWScalars &s, int64_t i) {
  float grads[N], params[N], ms[N], vs[N];
  loadN(views.grad, views.gradType, i, grads);
  loadN(views.param, views.paramType, i, params);
  loadN(views.m, views.mType, i, ms);
  loadN(views.v, views.vType, i, vs);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    float grad = grads[k];
    float param = roundTo(views.paramType, __fmul_rn(params[k], s.decay));
    float m = roundTo(views.mType, __fadd_rn(__fmul_rn(s.beta1, ms[k]),
                                             __fmul_rn(s.oneMinusBeta1, grad)));
    float gradSquared = __fmul_rn(__fmul_rn(s.oneMinusBeta2, grad), grad);
    float v =
        roundTo(views.vType, __fadd_rn(__fmul_rn(s.beta2, vs[k]), gradSquared));
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bc2Sqrt), s.eps);
    params[k] = __fsub_rn(param, __fdiv_rn(__fmul_rn(s.stepSize, m), denom));
    ms[k] = m;
    vs[k] = v;
  }
  storeN(views.param, views.paramType, i, params);
  storeN(views.m, views.mType, i, ms);
  storeN(views.v, views.vType, i, vs);
}

/// `deviceScalars`, where given, replaces `scalars` (a graph replay's
/// step).
__global__ void adamwKernel(AdamWViews views, AdamWScalars scalars,
                            const AdamWScalars *deviceScalars, int64_t numel,
                            int64_t vectorEnd) {
  if (deviceScalars)
    scalars = *deviceScalars;
  int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = first * kVec; i < vectorEnd; i += stride * kVec)
    updateElements<kVec>(views, scalars, i);
  for (int64_t i = vectorEnd + first; i < numel; i += stride)
    updateElements<1>(views, scalars, i);
}

bool isVectorAligned(const void *data, DType dtype) {
  return reinterpret_cast<uintptr_t>(data) % (kVec * dtypeSize(dtype)) == 0;
}

} // namespace

Status adamw(const AdamWArgs &args, DeviceStream stream) {
  for (DType dtype :
       {args.param.dtype, args.m.dtype, args.v.dtype, args.grad.dtype})
    if (dtype != DType::F32 && dtype != DType::BF16)
      return Status::invalidInput(std::string("adamwKernel: ") +
                                  dtypeName(dtype) +
                                  " storage is not supported on the device "
                                  "(expected f32 or bf16)");
  if (args.numel <= 0)
    return Status::ok();
  AdamWScalars scalars = adamwScalars(args);
  AdamWViews views{args.param.data, args.m.data,      args.v.data,
                   args.grad.data,  args.param.dtype, args.m.dtype,
                   args.v.dtype,    args.grad.dtype};
  bool aligned = isVectorAligned(args.param.data, args.param.dtype) &&
                 isVectorAligned(args.m.data, args.m.dtype) &&
                 isVectorAligned(args.v.data, args.v.dtype) &&
                 isVectorAligned(args.grad.data, args.grad.dtype);
  int64_t vectorEnd = aligned ? args.numel / kVec * kVec : 0;
  int64_t numThreads = vectorEnd / kVec + (args.numel - vectorEnd);
  auto numBlocks = static_cast<unsigned>(
      std::min(ceilDiv(numThreads, kThreads), kMaxBlocks));
  adamwKernel<<<numBlocks, kThreads, 0, stream>>>(
      views, scalars, args.deviceScalars, args.numel, vectorEnd);
  return launchStatus("adamwKernel");
}

} // namespace sharc::kernels::cuda
