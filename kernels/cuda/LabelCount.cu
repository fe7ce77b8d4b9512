//===- LabelCount.cu - valid labels and the step's loss on the device -----===//
//
// Implements the math stated in kernels/LabelCount.h with
// cpu/LabelCount.cpp's expressions. One kernel for both ops: one block of
// kCountThreads; thread i counts labels i, i + kCountThreads, ... and the
// block sums the counts in a fixed tree (exact: integers); thread 0 writes
// the count, or x * count / max(1, total). Bound: numTokens int32 reads,
// a few microseconds at most; it runs once or twice a step.
//
//===----------------------------------------------------------------------===//

#include "kernels/LabelCount.h"
#include "kernels/cuda/BlockReduce.cuh"
#include "kernels/cuda/Launch.h"

namespace sharc::kernels::cuda {
namespace {

constexpr int kCountThreads = 1024;

/// With x null, out = count; else out = x * count / max(1, total).
__global__ void __launch_bounds__(kCountThreads)
    labelCountKernel(const int32_t *labels, int64_t numTokens,
                     int64_t validVocab, const float *x, const float *total,
                     float *out) {
  __shared__ long long scratch[32];
  long long numValid = 0;
  for (int64_t t = threadIdx.x; t < numTokens; t += blockDim.x)
    numValid += isCounted(labels[t], validVocab) ? 1 : 0;
  numValid = blockReduce(numValid, SumOp(), scratch);
  if (threadIdx.x != 0)
    return;
  float count = static_cast<float>(numValid);
  *out = x ? *x * count / fmaxf(1.0f, *total) : count;
}

} // namespace

Status validCount(const ValidCountArgs &args, DeviceStream stream) {
  labelCountKernel<<<1, kCountThreads, 0, stream>>>(args.labels, args.numTokens,
                                                    args.validVocab, nullptr,
                                                    nullptr, args.count);
  return launchStatus("labelCountKernel");
}

Status countScale(const CountScaleArgs &args, DeviceStream stream) {
  labelCountKernel<<<1, kCountThreads, 0, stream>>>(
      args.labels, args.numTokens, args.validVocab, args.x, args.total, args.y);
  return launchStatus("labelCountKernel");
}

} // namespace sharc::kernels::cuda
