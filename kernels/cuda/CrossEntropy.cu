//===- CrossEntropy.cu - mean token cross entropy on the device -----------===//
//
// Implements the math stated in kernels/CrossEntropy.h with
// cpu/CrossEntropy.cpp's expressions: per row, the max of the first
// validVocab logits, then the sum of exp(x - max), lse = max + log(sum).
// A label outside [0, validVocab) (-100 included) marks an ignored row.
// Reductions are fixed trees, so both results are deterministic.
//
// crossEntropy runs two kernels and uses scratch (crossEntropyScratchBytes,
// one float per row):
//  - crossEntropyKernel: grid numTokens, block kLossThreads; block t leaves
//    row t's loss term lse - x[label] (0 for an ignored row, which is not
//    read) in scratch[t]. Bound: DRAM bandwidth, the valid rows' validVocab
//    logits read once (the second pass hits L1): 8192 x 6400 bf16 is
//    105 MB, about 26 us at 4 TB/s.
//  - crossEntropySumKernel: one block of kSumThreads; thread i adds the
//    terms i, i + kSumThreads, ... in order and counts the valid labels,
//    then the block reduces in a fixed tree and divides. The order depends
//    on numTokens only, so the loss is the same bits on every run and GPU.
//
// crossEntropyGradKernel: a persistent grid of 512-thread blocks (as many
// as the SMs hold, at most one per row), each owning rows blockIdx.x,
// blockIdx.x + gridDim.x, ...; each block first counts the valid labels
// itself (numTokens int32 reads from L2), which saves a workspace and a
// launch. A row is read from DRAM once (three passes, two from L2) and
// dlogits written once. Bound: DRAM bandwidth, numTokens * vocab * (|x| +
// |dx|) bytes.
//
// Where the logits are bf16 or f32 rows of whole, aligned 16-byte vectors,
// CrossEntropyVec.cu's warp-per-row kernels (one pass for the lse) run
// instead of crossEntropyKernel and crossEntropyGradKernel.
//
//===----------------------------------------------------------------------===//

#include "kernels/CrossEntropy.h"
#include "kernels/cuda/BlockReduce.cuh"
#include "kernels/cuda/CrossEntropyVec.h"
#include "kernels/cuda/ElementAccess.cuh"
#include "kernels/cuda/Launch.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

namespace sharc::kernels::cuda {
namespace {

constexpr int kLossThreads = 256;
constexpr int kSumThreads = 1024;
constexpr int kGradThreads = 512;

/// log-sum-exp of the first validVocab logits at `base`, in every thread.
__device__ float rowLse(ConstTensorView logits, int64_t base,
                        int64_t validVocab, float *scratch) {
  float maxLogit = -INFINITY;
  for (int64_t v = threadIdx.x; v < validVocab; v += blockDim.x)
    maxLogit = fmaxf(maxLogit, loadAs(logits, base + v));
  maxLogit = blockReduce(maxLogit, MaxOp(), scratch);
  float sumExp = 0.0f;
  for (int64_t v = threadIdx.x; v < validVocab; v += blockDim.x)
    sumExp += expf(loadAs(logits, base + v) - maxLogit);
  sumExp = blockReduce(sumExp, SumOp(), scratch);
  return maxLogit + logf(sumExp);
}

__global__ void __launch_bounds__(kLossThreads)
    crossEntropyKernel(ConstTensorView logits, const int32_t *labels,
                       float *rowLoss, int64_t vocab, int64_t validVocab) {
  __shared__ float scratch[32];
  int64_t t = blockIdx.x;
  int32_t label = labels[t];
  // The whole block leaves together, before any reduction.
  if (!isCounted(label, validVocab)) {
    if (threadIdx.x == 0)
      rowLoss[t] = 0.0f;
    return;
  }
  int64_t base = t * vocab;
  float lse = rowLse(logits, base, validVocab, scratch);
  if (threadIdx.x == 0)
    rowLoss[t] = lse - loadAs(logits, base + label);
}

__global__ void __launch_bounds__(kSumThreads)
    crossEntropySumKernel(const float *rowLoss, const int32_t *labels,
                          float *loss, int64_t numTokens, int64_t validVocab) {
  __shared__ float scratch[32];
  __shared__ long long countScratch[32];
  float total = 0.0f;
  long long numValid = 0;
  for (int64_t t = threadIdx.x; t < numTokens; t += blockDim.x) {
    total += rowLoss[t];
    numValid += isCounted(labels[t], validVocab) ? 1 : 0;
  }
  total = blockReduce(total, SumOp(), scratch);
  numValid = blockReduce(numValid, SumOp(), countScratch);
  if (threadIdx.x == 0)
    *loss = total / static_cast<float>(numValid > 1 ? numValid : 1);
}

__global__ void __launch_bounds__(kGradThreads)
    crossEntropyGradKernel(ConstTensorView logits, const int32_t *labels,
                           const float *dloss, TensorView dlogits,
                           int64_t numTokens, int64_t vocab,
                           int64_t validVocab) {
  __shared__ float scratch[32];
  __shared__ long long countScratch[32];
  float rowScale =
      lossGradScale(labels, numTokens, validVocab, dloss, countScratch);
  for (int64_t t = blockIdx.x; t < numTokens; t += gridDim.x) {
    int32_t label = labels[t];
    int64_t base = t * vocab;
    int64_t numWritten = 0;
    if (isCounted(label, validVocab)) {
      float lse = rowLse(logits, base, validVocab, scratch);
      for (int64_t v = threadIdx.x; v < validVocab; v += blockDim.x) {
        float target = v == label ? 1.0f : 0.0f;
        storeAs(dlogits, base + v,
                rowScale * (expf(loadAs(logits, base + v) - lse) - target));
      }
      numWritten = validVocab;
    }
    for (int64_t v = numWritten + threadIdx.x; v < vocab; v += blockDim.x)
      storeAs(dlogits, base + v, 0.0f);
  }
}

} // namespace

int64_t crossEntropyScratchBytes(const CrossEntropyArgs &args) {
  return std::max<int64_t>(args.numTokens, 0) *
         static_cast<int64_t>(sizeof(float));
}

Status crossEntropy(const CrossEntropyArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("crossEntropyKernel", {args.logits.dtype}));
  if (args.numTokens > 0 && !args.scratch)
    return Status::invalidInput("crossEntropyKernel: no scratch, " +
                                std::to_string(crossEntropyScratchBytes(args)) +
                                " bytes needed");
  auto *rowLoss = static_cast<float *>(args.scratch);
  if (args.numTokens > 0 && !crossEntropyVec(args, rowLoss, stream)) {
    crossEntropyKernel<<<static_cast<unsigned>(args.numTokens), kLossThreads, 0,
                         stream>>>(args.logits, args.labels, rowLoss,
                                   args.vocab, args.validVocab);
    SHARC_TRY(launchStatus("crossEntropyKernel"));
  }
  // With no rows the loss is still written: 0, as on the cpu.
  crossEntropySumKernel<<<1, kSumThreads, 0, stream>>>(
      rowLoss, args.labels, args.loss, args.numTokens, args.validVocab);
  return launchStatus("crossEntropySumKernel");
}

Status crossEntropyGrad(const CrossEntropyGradArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("crossEntropyGradKernel",
                              {args.logits.dtype, args.dlogits.dtype}));
  if (args.numTokens <= 0 || args.vocab <= 0)
    return Status::ok();
  int numSms = 0;
  SHARC_TRY(multiprocessorCount(numSms));
  // The vector path's blocks each count the labels too: four a SM.
  if (crossEntropyGradVec(args, static_cast<int64_t>(numSms) * 4, stream))
    return launchStatus("crossEntropyGradVecKernel");
  int64_t residentBlocks = static_cast<int64_t>(numSms) * (2048 / kGradThreads);
  auto numBlocks =
      static_cast<unsigned>(std::min(args.numTokens, residentBlocks));
  crossEntropyGradKernel<<<numBlocks, kGradThreads, 0, stream>>>(
      args.logits, args.labels, args.dloss, args.dlogits, args.numTokens,
      args.vocab, args.validVocab);
  return launchStatus("crossEntropyGradKernel");
}

} // namespace sharc::kernels::cuda
