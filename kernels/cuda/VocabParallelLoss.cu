//===- VocabParallelLoss.cu - sharded-vocab cross entropy on the device ---===//
//
// Implements the math stated in kernels/VocabParallelLoss.h with
// cpu/VocabParallelLoss.cpp's expressions. Local columns [0, numLocal) are
// real vocabulary, numLocal = clamp(validVocab - vocabStart, 0, localVocab);
// the rest is padding. Reductions are fixed trees (deterministic).
//
// vocabMaxKernel, sumExpKernel: one 512-thread block per token row, threads
// striding over its numLocal columns. Bound: DRAM bandwidth, numTokens *
// numLocal * |x| bytes.
// targetLogitKernel: 1-D grid of 256-thread blocks, one thread per token.
// Bound: latency (one scattered load per token).
// vocabParallelLossKernel: one 1024-thread block over the numTokens
// statistics (the loss is one scalar and the args have no workspace).
// Bound: one SM reading 3 * numTokens values, a few microseconds.
// vocabParallelLossGradKernel: a persistent grid of 512-thread blocks (as
// many as the SMs hold, at most one per row), each owning rows blockIdx.x,
// blockIdx.x + gridDim.x, ...; each block first counts the valid labels
// itself from L2, which saves a workspace and a launch. Bound: DRAM
// bandwidth, numTokens * localVocab * (|x| + |dx|) bytes.
//
//===----------------------------------------------------------------------===//

#include "kernels/VocabParallelLoss.h"
#include "kernels/cuda/BlockReduce.cuh"
#include "kernels/cuda/ElementAccess.cuh"
#include "kernels/cuda/Launch.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

namespace sharc::kernels::cuda {
namespace {

constexpr int kRowThreads = 512;
constexpr int kTokenThreads = 256;
constexpr int kLossThreads = 1024;

__global__ void __launch_bounds__(kRowThreads)
    vocabMaxKernel(ConstTensorView logits, TensorView vocabMax,
                   int64_t localVocab, int64_t numLocal) {
  __shared__ float scratch[32];
  int64_t base = static_cast<int64_t>(blockIdx.x) * localVocab;
  float maxLogit = -INFINITY;
  for (int64_t j = threadIdx.x; j < numLocal; j += blockDim.x)
    maxLogit = fmaxf(maxLogit, loadAs(logits, base + j));
  maxLogit = blockReduce(maxLogit, MaxOp(), scratch);
  if (threadIdx.x == 0)
    storeAs(vocabMax, blockIdx.x, maxLogit);
}

__global__ void targetLogitKernel(ConstTensorView logits, const int32_t *labels,
                                  TensorView targetLogit, int64_t numTokens,
                                  int64_t localVocab, int64_t vocabStart,
                                  int64_t validVocab) {
  int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= numTokens)
    return;
  int32_t label = labels[t];
  int64_t column = static_cast<int64_t>(label) - vocabStart;
  bool isLocal = column >= 0 && column < localVocab;
  float value = 0.0f;
  if (isCounted(label, validVocab) && isLocal)
    value = loadAs(logits, t * localVocab + column);
  storeAs(targetLogit, t, value);
}

__global__ void __launch_bounds__(kRowThreads)
    sumExpKernel(ConstTensorView logits, ConstTensorView vocabMax,
                 TensorView sumExp, int64_t localVocab, int64_t numLocal) {
  __shared__ float scratch[32];
  int64_t base = static_cast<int64_t>(blockIdx.x) * localVocab;
  float globalMax = loadAs(vocabMax, blockIdx.x);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < numLocal; j += blockDim.x)
    sum += expf(loadAs(logits, base + j) - globalMax);
  sum = blockReduce(sum, SumOp(), scratch);
  if (threadIdx.x == 0)
    storeAs(sumExp, blockIdx.x, sum);
}

__global__ void __launch_bounds__(kLossThreads)
    vocabParallelLossKernel(const int32_t *labels, ConstTensorView vocabMax,
                            ConstTensorView targetLogit, ConstTensorView sumExp,
                            float *loss, int64_t numTokens,
                            int64_t validVocab) {
  __shared__ float scratch[32];
  __shared__ long long countScratch[32];
  float total = 0.0f;
  long long numValid = 0;
  for (int64_t t = threadIdx.x; t < numTokens; t += blockDim.x) {
    if (!isCounted(labels[t], validVocab))
      continue;
    float lse = logf(loadAs(sumExp, t)) + loadAs(vocabMax, t);
    total += lse - loadAs(targetLogit, t);
    ++numValid;
  }
  total = blockReduce(total, SumOp(), scratch);
  numValid = blockReduce(numValid, SumOp(), countScratch);
  if (threadIdx.x == 0)
    *loss = total / static_cast<float>(numValid > 1 ? numValid : 1);
}

__global__ void __launch_bounds__(kRowThreads)
    vocabParallelLossGradKernel(ConstTensorView logits, const int32_t *labels,
                                ConstTensorView vocabMax,
                                ConstTensorView sumExp, const float *dloss,
                                TensorView dlogits, int64_t numTokens,
                                int64_t localVocab, int64_t vocabStart,
                                int64_t validVocab, int64_t numLocal) {
  __shared__ long long countScratch[32];
  float rowScale =
      lossGradScale(labels, numTokens, validVocab, dloss, countScratch);
  for (int64_t t = blockIdx.x; t < numTokens; t += gridDim.x) {
    int32_t label = labels[t];
    int64_t base = t * localVocab;
    int64_t numWritten = 0;
    if (isCounted(label, validVocab)) {
      float globalMax = loadAs(vocabMax, t);
      float globalSum = loadAs(sumExp, t);
      for (int64_t j = threadIdx.x; j < numLocal; j += blockDim.x) {
        float target = vocabStart + j == label ? 1.0f : 0.0f;
        float prob = expf(loadAs(logits, base + j) - globalMax) / globalSum;
        storeAs(dlogits, base + j, rowScale * (prob - target));
      }
      numWritten = numLocal;
    }
    for (int64_t j = numWritten + threadIdx.x; j < localVocab; j += blockDim.x)
      storeAs(dlogits, base + j, 0.0f);
  }
}

int64_t localValidColumns(int64_t localVocab, int64_t vocabStart,
                          int64_t validVocab) {
  return std::clamp<int64_t>(validVocab - vocabStart, 0, localVocab);
}

} // namespace

Status vocabMax(const VocabMaxArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("vocabMaxKernel",
                              {args.logits.dtype, args.vocabMax.dtype}));
  if (args.numTokens <= 0)
    return Status::ok();
  int64_t numLocal =
      localValidColumns(args.localVocab, args.vocabStart, args.validVocab);
  vocabMaxKernel<<<static_cast<unsigned>(args.numTokens), kRowThreads, 0,
                   stream>>>(args.logits, args.vocabMax, args.localVocab,
                             numLocal);
  return launchStatus("vocabMaxKernel");
}

Status targetLogit(const TargetLogitArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("targetLogitKernel",
                              {args.logits.dtype, args.targetLogit.dtype}));
  if (args.numTokens <= 0)
    return Status::ok();
  auto numBlocks =
      static_cast<unsigned>(ceilDiv(args.numTokens, kTokenThreads));
  targetLogitKernel<<<numBlocks, kTokenThreads, 0, stream>>>(
      args.logits, args.labels, args.targetLogit, args.numTokens,
      args.localVocab, args.vocabStart, args.validVocab);
  return launchStatus("targetLogitKernel");
}

Status sumExp(const SumExpArgs &args, DeviceStream stream) {
  SHARC_TRY(
      checkFloatStorage("sumExpKernel", {args.logits.dtype, args.vocabMax.dtype,
                                         args.sumExp.dtype}));
  if (args.numTokens <= 0)
    return Status::ok();
  int64_t numLocal =
      localValidColumns(args.localVocab, args.vocabStart, args.validVocab);
  sumExpKernel<<<static_cast<unsigned>(args.numTokens), kRowThreads, 0,
                 stream>>>(args.logits, args.vocabMax, args.sumExp,
                           args.localVocab, numLocal);
  return launchStatus("sumExpKernel");
}

Status vocabParallelLoss(const VocabParallelLossArgs &args,
                         DeviceStream stream) {
  SHARC_TRY(checkFloatStorage(
      "vocabParallelLossKernel",
      {args.vocabMax.dtype, args.targetLogit.dtype, args.sumExp.dtype}));
  vocabParallelLossKernel<<<1, kLossThreads, 0, stream>>>(
      args.labels, args.vocabMax, args.targetLogit, args.sumExp, args.loss,
      args.numTokens, args.validVocab);
  return launchStatus("vocabParallelLossKernel");
}

Status vocabParallelLossGrad(const VocabParallelLossGradArgs &args,
                             DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("vocabParallelLossGradKernel",
                              {args.logits.dtype, args.vocabMax.dtype,
                               args.sumExp.dtype, args.dlogits.dtype}));
  if (args.numTokens <= 0 || args.localVocab <= 0)
    return Status::ok();
  int64_t numLocal =
      localValidColumns(args.localVocab, args.vocabStart, args.validVocab);
  int numSms = 0;
  SHARC_TRY(multiprocessorCount(numSms));
  int64_t residentBlocks = static_cast<int64_t>(numSms) * (2048 / kRowThreads);
  auto numBlocks =
      static_cast<unsigned>(std::min(args.numTokens, residentBlocks));
  vocabParallelLossGradKernel<<<numBlocks, kRowThreads, 0, stream>>>(
      args.logits, args.labels, args.vocabMax, args.sumExp, args.dloss,
      args.dlogits, args.numTokens, args.localVocab, args.vocabStart,
      args.validVocab, numLocal);
  return launchStatus("vocabParallelLossGradKernel");
}

} // namespace sharc::kernels::cuda
