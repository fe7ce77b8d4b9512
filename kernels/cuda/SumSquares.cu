//===- SumSquares.cu - the weighted sum of squares on the device ----------===//
//
// Implements the math stated in kernels/SumSquares.h.
//
// Launch shape: sumSquaresChunkKernel has one 256-thread block per chunk of
// kChunkElements elements of one tensor; a thread adds the squares of its
// strided elements in double, the block reduces them (blockReduce: fixed
// order) and writes the chunk's partial divided by the tensor's replica
// count. sumSquaresTotalKernel, one block of kThreads, adds the partials in
// a fixed order and stores the f32 total. No atomics, so the same bits on
// every run. Bound: DRAM bandwidth, the tensors' bytes read once (a
// model's gradients, once a step).
//
//===----------------------------------------------------------------------===//

#include "kernels/SumSquares.h"
#include "kernels/cuda/BlockReduce.cuh"
#include "kernels/cuda/ElementAccess.cuh"
#include "kernels/cuda/Launch.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

namespace sharc::kernels::cuda {
namespace {

constexpr int kThreads = 256;
/// 64 elements per thread: a chunk is a few microseconds of DRAM traffic.
constexpr int64_t kChunkElements = int64_t(kThreads) * 64;

struct SquaresTensor {
  const void *data;
  DType dtype;
  double weight; ///< 1 / replicas
};

struct SquaresChunk {
  int32_t tensor;
  int64_t begin, end;
};

__device__ __forceinline__ double loadSquare(const SquaresTensor &tensor,
                                             int64_t i) {
  double value =
      tensor.dtype == DType::BF16
          ? static_cast<double>(__bfloat162float(
                static_cast<const __nv_bfloat16 *>(tensor.data)[i]))
          : static_cast<double>(static_cast<const float *>(tensor.data)[i]);
  return value * value;
}

__global__ void sumSquaresChunkKernel(const SquaresTensor *tensors,
                                      const SquaresChunk *chunks,
                                      double *partials) {
  __shared__ double scratch[kThreads / 32];
  SquaresChunk chunk = chunks[blockIdx.x];
  SquaresTensor tensor = tensors[chunk.tensor];
  double sum = 0.0;
  for (int64_t i = chunk.begin + threadIdx.x; i < chunk.end; i += kThreads)
    sum += loadSquare(tensor, i);
  sum = blockReduce(sum, SumOp{}, scratch);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = sum * tensor.weight;
}

__global__ void sumSquaresTotalKernel(const double *partials,
                                      int64_t numPartials, float *result) {
  __shared__ double scratch[kThreads / 32];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < numPartials; i += kThreads)
    sum += partials[i];
  sum = blockReduce(sum, SumOp{}, scratch);
  if (threadIdx.x == 0)
    *result = static_cast<float>(sum);
}

} // namespace

struct SumSquares::Tables {
  SquaresTensor *tensors = nullptr;
  SquaresChunk *chunks = nullptr;
  double *partials = nullptr;
  int64_t numChunks = 0;
  float *result = nullptr;
  ~Tables() {
    cudaFree(tensors);
    cudaFree(chunks);
    cudaFree(partials);
  }
};

SumSquares::~SumSquares() = default;

Result<std::unique_ptr<SumSquares>>
SumSquares::create(const SumSquaresArgs &args) {
  size_t numTensors = args.xs.size();
  if (args.numels.size() != numTensors || args.replicas.size() != numTensors)
    return Status::invalidInput(
        "sumSquaresKernel: one numel and one replica count per tensor");
  std::vector<SquaresTensor> tensors;
  std::vector<SquaresChunk> chunks;
  for (size_t t = 0; t < numTensors; ++t) {
    DType dtype = args.xs[t].dtype;
    SHARC_TRY(checkFloatStorage("sumSquaresKernel", {dtype}));
    if (args.replicas[t] < 1)
      return Status::invalidInput("sumSquaresKernel: replicas must be >= 1");
    tensors.push_back(
        {args.xs[t].data, dtype, 1.0 / static_cast<double>(args.replicas[t])});
    for (int64_t begin = 0; begin < args.numels[t]; begin += kChunkElements)
      chunks.push_back({static_cast<int32_t>(t), begin,
                        std::min(args.numels[t], begin + kChunkElements)});
  }
  std::unique_ptr<SumSquares> op(new SumSquares());
  op->tables_ = std::make_unique<Tables>();
  Tables &tables = *op->tables_;
  tables.numChunks = static_cast<int64_t>(chunks.size());
  tables.result = args.sum;
  SHARC_CUDA(cudaMalloc(&tables.partials,
                        std::max<size_t>(1, chunks.size()) * sizeof(double)));
  if (!chunks.empty()) {
    SHARC_CUDA(
        cudaMalloc(&tables.tensors, tensors.size() * sizeof(SquaresTensor)));
    SHARC_CUDA(
        cudaMalloc(&tables.chunks, chunks.size() * sizeof(SquaresChunk)));
    SHARC_CUDA(cudaMemcpy(tables.tensors, tensors.data(),
                          tensors.size() * sizeof(SquaresTensor),
                          cudaMemcpyHostToDevice));
    SHARC_CUDA(cudaMemcpy(tables.chunks, chunks.data(),
                          chunks.size() * sizeof(SquaresChunk),
                          cudaMemcpyHostToDevice));
  }
  return Result<std::unique_ptr<SumSquares>>(std::move(op));
}

Status SumSquares::run(DeviceStream stream) const {
  const Tables &tables = *tables_;
  if (tables.numChunks > 0) {
    sumSquaresChunkKernel<<<static_cast<unsigned>(tables.numChunks), kThreads,
                            0, stream>>>(tables.tensors, tables.chunks,
                                         tables.partials);
    SHARC_TRY(launchStatus("sumSquaresChunkKernel"));
  }
  // With nothing to add the sum is still written: 0, as on the cpu.
  sumSquaresTotalKernel<<<1, kThreads, 0, stream>>>(
      tables.partials, tables.numChunks, tables.result);
  return launchStatus("sumSquaresTotalKernel");
}

} // namespace sharc::kernels::cuda
