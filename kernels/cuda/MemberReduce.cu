//===- MemberReduce.cu - a reduction over ranks' buffers ------------------===//
//
// One thread per output element, grid-strided; the members' pointers travel
// in the argument struct (at most kMaxReduceMembers of them). Memory-bound
// and only on the path where ranks share a GPU, so scalar loads do.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/MemberReduce.h"

#include "kernels/cuda/Launch.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

namespace sharc::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 132 * 16;

/// The type sums are kept in: fp32 for both float storages, as the cpu's.
template <typename T> struct Accumulator {
  using Type = T;
};
template <> struct Accumulator<__nv_bfloat16> {
  using Type = float;
};

template <typename T> __device__ typename Accumulator<T>::Type widen(T value) {
  return static_cast<typename Accumulator<T>::Type>(value);
}
template <> __device__ float widen(__nv_bfloat16 value) {
  return __bfloat162float(value);
}

template <typename T, typename A> __device__ T narrow(A value) {
  return static_cast<T>(value);
}
template <> __device__ __nv_bfloat16 narrow(float value) {
  return __float2bfloat16_rn(value);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    reduceMembersKernel(MemberReduceArgs a) {
  using A = typename Accumulator<T>::Type;
  int64_t total = a.rows * a.cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t r = i / a.cols, c = i % a.cols;
    int64_t at = a.srcOffset + r * a.srcPitch + c;
    A acc = widen(static_cast<const T *>(a.srcs[0])[at]);
    for (int m = 1; m < a.numMembers; ++m) {
      A x = widen(static_cast<const T *>(a.srcs[m])[at]);
      acc = a.max ? (x > acc ? x : acc) : acc + x;
    }
    static_cast<T *>(a.dst)[r * a.dstPitch + c] = narrow<T>(acc);
  }
}

template <typename T>
Status launch(const MemberReduceArgs &args, DeviceStream stream) {
  auto blocks = static_cast<unsigned>(
      std::min(ceilDiv(args.rows * args.cols, kThreads), kMaxBlocks));
  reduceMembersKernel<T><<<blocks, kThreads, 0, stream>>>(args);
  return launchStatus("reduceMembersKernel");
}

} // namespace

Status reduceMembers(const MemberReduceArgs &args, DeviceStream stream) {
  if (args.numMembers < 1 || args.numMembers > kMaxReduceMembers)
    return Status::invalidInput("a reduction over " +
                                std::to_string(args.numMembers) +
                                " ranks sharing GPUs (at most " +
                                std::to_string(kMaxReduceMembers) + ")");
  if (args.rows == 0 || args.cols == 0)
    return Status::ok();
  switch (args.dtype) {
  case DType::F32:
    return launch<float>(args, stream);
  case DType::BF16:
    return launch<__nv_bfloat16>(args, stream);
  case DType::F64:
    return launch<double>(args, stream);
  case DType::I32:
    return launch<int32_t>(args, stream);
  }
  return Status::invalidInput("reduceMembers: unknown dtype");
}

} // namespace sharc::kernels::cuda
