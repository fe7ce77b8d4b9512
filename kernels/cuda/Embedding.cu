//===- Embedding.cu - embedding lookup and its gradient on the device -----===//
//
// Implements the math stated in kernels/Embedding.h.
//
// embeddingKernel: one 128-thread block per token; the threads stride over
// the hidden columns, 4 at a time as one 8- or 16-byte vector when hidden is
// a multiple of 4 and both views are aligned. Bound: DRAM bandwidth,
// numTokens * hidden * (|table| + |out|) bytes.
//
// embeddingGradKernel: deterministic and atomics-free on the output, with
// no workspace. Grid (row tiles, ceil(hidden / kHiddenTile)), block 256
// threads (8 warps). A block owns rowsPerBlock consecutive table rows (sized
// so that about kListCapacity / 2 tokens hit them) and kHiddenTile hidden
// columns, and writes each of its outputs exactly once:
//   1. each warp counts, per row, the hits in its contiguous eighth of ids;
//   2. a scan turns the counts into each row's slice of a shared-memory
//      token list and each warp's offset inside it;
//   3. each warp lists its hits in token order (__match_any_sync ranks the
//      lanes that hit the same row), so every row's slice is ascending;
//   4. one warp per row sums dout over the row's slice in that order (fp32)
//      and stores the row, zero when no token hits it.
// Rows whose hits exceed the list are handled in batches of rows that fit
// (steps 3-4 per batch, re-reading ids); a row hit more than kListCapacity
// times on its own is summed by the whole block scanning ids in order.
// Either way each output is summed in increasing token order from 0, the
// cpu's order, so f32 results equal the cpu's bit for bit. Bound: DRAM
// bandwidth for the numRows * hidden * |dtable| writes plus the hit rows of
// dout; ids are re-read from L2 twice per block (grid.x * grid.y *
// numTokens * 8 bytes).
//
//===----------------------------------------------------------------------===//

#include "kernels/Embedding.h"
#include "kernels/cuda/ElementAccess.cuh"
#include "kernels/cuda/Launch.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

namespace sharc::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kVec = 4;

constexpr int kGradThreads = 256;
constexpr int kGradWarps = kGradThreads / 32;
constexpr int kMinBlockRows = 32;
constexpr int kMaxBlockRows = 512;
constexpr int kListCapacity = 4096;
constexpr int64_t kHiddenTile = 1024;
constexpr int kHeavyColumnsPerThread = kHiddenTile / kGradThreads;

__global__ void __launch_bounds__(kThreads)
    embeddingKernel(ConstTensorView table, const int32_t *ids, TensorView out,
                    int64_t numRows, int64_t hidden, int64_t vocabStart,
                    bool vectorized) {
  int64_t t = blockIdx.x;
  int64_t row = static_cast<int64_t>(ids[t]) - vocabStart;
  bool isHit = row >= 0 && row < numRows;
  int64_t outBase = t * hidden;
  int64_t tableBase = row * hidden;
  if (vectorized) {
    for (int64_t h = threadIdx.x * kVec; h < hidden; h += blockDim.x * kVec) {
      float values[kVec] = {};
      if (isHit)
        loadVec4(table, tableBase + h, values);
      storeVec4(out, outBase + h, values);
    }
    return;
  }
  for (int64_t h = threadIdx.x; h < hidden; h += blockDim.x)
    storeAs(out, outBase + h, isHit ? loadAs(table, tableBase + h) : 0.0f);
}

struct GradShape {
  int64_t numTokens, numRows, hidden, vocabStart;
  int rowsPerBlock;
  bool vectorized;
};

/// The block's shared state: per-warp hit counts (then offsets) per row,
/// each row's start in the token list (an exclusive scan over the block's
/// rows), and the list itself.
struct GradShared {
  int warpCounts[kGradWarps][kMaxBlockRows];
  int rowStart[kMaxBlockRows + 1];
  int tokens[kListCapacity];
};

/// Sums dout over the listed tokens of rows [batchBegin, batchEnd), one
/// warp per row, and stores the rows' columns [hBegin, hEnd).
__device__ void sumListedRows(ConstTensorView dout, TensorView dtable,
                              const GradShared &shared, const GradShape &shape,
                              int64_t firstRow, int batchBegin, int batchEnd,
                              int64_t hBegin, int64_t hEnd) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int listBase = shared.rowStart[batchBegin];
  for (int r = batchBegin + warp; r < batchEnd; r += kGradWarps) {
    int listBegin = shared.rowStart[r] - listBase;
    int listEnd = shared.rowStart[r + 1] - listBase;
    int64_t outBase = (firstRow + r) * shape.hidden;
    if (shape.vectorized) {
      for (int64_t h = hBegin + lane * kVec; h < hEnd; h += 32 * kVec) {
        float sums[kVec] = {};
        for (int k = listBegin; k < listEnd; ++k) {
          float values[kVec];
          loadVec4(dout, shared.tokens[k] * shape.hidden + h, values);
#pragma unroll
          for (int j = 0; j < kVec; ++j)
            sums[j] += values[j];
        }
        storeVec4(dtable, outBase + h, sums);
      }
    } else {
      for (int64_t h = hBegin + lane; h < hEnd; h += 32) {
        float sum = 0.0f;
        for (int k = listBegin; k < listEnd; ++k)
          sum += loadAs(dout, shared.tokens[k] * shape.hidden + h);
        storeAs(dtable, outBase + h, sum);
      }
    }
  }
}

/// Sums and stores one row that too many tokens hit for the list: the
/// whole block scans ids in order, a tile of kListCapacity at a time, each
/// thread adding the hits to its kHeavyColumnsPerThread columns.
__device__ void sumHeavyRow(ConstTensorView dout, const int32_t *ids,
                            TensorView dtable, GradShared &shared,
                            const GradShape &shape, int64_t row, int64_t hBegin,
                            int64_t hEnd) {
  int64_t id = shape.vocabStart + row;
  float sums[kHeavyColumnsPerThread] = {};
  for (int64_t tileBegin = 0; tileBegin < shape.numTokens;
       tileBegin += kListCapacity) {
    int tileLength = static_cast<int>(
        min(static_cast<int64_t>(kListCapacity), shape.numTokens - tileBegin));
    __syncthreads(); // the list's previous readers are done
    for (int i = threadIdx.x; i < tileLength; i += blockDim.x)
      shared.tokens[i] = ids[tileBegin + i];
    __syncthreads();
    for (int i = 0; i < tileLength; ++i) {
      if (shared.tokens[i] != id)
        continue;
      int64_t source = (tileBegin + i) * shape.hidden;
#pragma unroll
      for (int k = 0; k < kHeavyColumnsPerThread; ++k) {
        int64_t h = hBegin + threadIdx.x + k * kGradThreads;
        if (h < hEnd)
          sums[k] += loadAs(dout, source + h);
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kHeavyColumnsPerThread; ++k) {
    int64_t h = hBegin + threadIdx.x + k * kGradThreads;
    if (h < hEnd)
      storeAs(dtable, row * shape.hidden + h, sums[k]);
  }
}

/// Lists the hits of rows [batchBegin, batchEnd) in token order: warp w
/// scans its segment of ids 32 at a time, and lanes that hit the same row
/// take consecutive slots in lane order.
__device__ void listBatchTokens(const int32_t *ids, GradShared &shared,
                                int64_t firstId, int64_t segmentBegin,
                                int64_t segmentEnd, int batchBegin,
                                int batchEnd) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int listBase = shared.rowStart[batchBegin];
  for (int64_t tileBegin = segmentBegin; tileBegin < segmentEnd;
       tileBegin += 32) {
    int64_t t = tileBegin + lane;
    int64_t r = t < segmentEnd ? static_cast<int64_t>(ids[t]) - firstId : -1;
    bool isListed = r >= batchBegin && r < batchEnd;
    int key = isListed ? static_cast<int>(r) : -1;
    unsigned peers = __match_any_sync(0xffffffffu, key);
    int rank = __popc(peers & ((1u << lane) - 1u));
    if (isListed)
      shared.tokens[shared.rowStart[key] - listBase +
                    shared.warpCounts[warp][key] + rank] = static_cast<int>(t);
    __syncwarp();
    if (isListed && rank == 0)
      shared.warpCounts[warp][key] += __popc(peers);
    __syncwarp();
  }
}

__global__ void __launch_bounds__(kGradThreads)
    embeddingGradKernel(ConstTensorView dout, const int32_t *ids,
                        TensorView dtable, GradShape shape) {
  __shared__ GradShared shared;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t firstRow = static_cast<int64_t>(blockIdx.x) * shape.rowsPerBlock;
  int numBlockRows = static_cast<int>(
      min(static_cast<int64_t>(shape.rowsPerBlock), shape.numRows - firstRow));
  int64_t firstId = shape.vocabStart + firstRow;
  int64_t hBegin = static_cast<int64_t>(blockIdx.y) * kHiddenTile;
  int64_t hEnd = min(shape.hidden, hBegin + kHiddenTile);
  int64_t segmentLength = (shape.numTokens + kGradWarps - 1) / kGradWarps;
  int64_t segmentBegin = min(shape.numTokens, warp * segmentLength);
  int64_t segmentEnd = min(shape.numTokens, segmentBegin + segmentLength);

  // 1. Hits per (warp, row).
  for (int i = threadIdx.x; i < kGradWarps * kMaxBlockRows; i += blockDim.x)
    (&shared.warpCounts[0][0])[i] = 0;
  __syncthreads();
  for (int64_t t = segmentBegin + lane; t < segmentEnd; t += 32) {
    int64_t r = static_cast<int64_t>(ids[t]) - firstId;
    if (r >= 0 && r < numBlockRows)
      atomicAdd(&shared.warpCounts[warp][r], 1);
  }
  __syncthreads();

  // 2. Per row, each warp's offset (exclusive over warps) and the total.
  for (int r = threadIdx.x; r < numBlockRows; r += blockDim.x) {
    int running = 0;
    for (int w = 0; w < kGradWarps; ++w) {
      int count = shared.warpCounts[w][r];
      shared.warpCounts[w][r] = running;
      running += count;
    }
    shared.rowStart[r + 1] = running;
  }
  __syncthreads();
  // Then an exclusive scan of the totals: each lane of warp 0 scans a
  // contiguous run of rows, and the lanes' sums are scanned by shuffles.
  if (warp == 0) {
    int rowsPerLane = (numBlockRows + 31) / 32;
    int begin = min(numBlockRows, lane * rowsPerLane);
    int end = min(numBlockRows, begin + rowsPerLane);
    int laneSum = 0;
    for (int r = begin; r < end; ++r) {
      laneSum += shared.rowStart[r + 1];
      shared.rowStart[r + 1] = laneSum;
    }
    int inclusive = laneSum;
    for (int offset = 1; offset < 32; offset *= 2) {
      int other = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset)
        inclusive += other;
    }
    for (int r = begin; r < end; ++r)
      shared.rowStart[r + 1] += inclusive - laneSum;
    if (lane == 0)
      shared.rowStart[0] = 0;
  }
  __syncthreads();

  // 3-4. Batches of rows whose hits fit the list; every thread computes the
  // same batch bounds from shared memory.
  for (int batchBegin = 0; batchBegin < numBlockRows;) {
    int listBase = shared.rowStart[batchBegin];
    int batchEnd = batchBegin + 1;
    if (shared.rowStart[batchBegin + 1] - listBase > kListCapacity) {
      sumHeavyRow(dout, ids, dtable, shared, shape, firstRow + batchBegin,
                  hBegin, hEnd);
    } else {
      int last = numBlockRows; // the largest end that fits
      while (batchEnd < last) {
        int middle = (batchEnd + last + 1) / 2;
        if (shared.rowStart[middle] - listBase <= kListCapacity)
          batchEnd = middle;
        else
          last = middle - 1;
      }
      listBatchTokens(ids, shared, firstId, segmentBegin, segmentEnd,
                      batchBegin, batchEnd);
      __syncthreads();
      sumListedRows(dout, dtable, shared, shape, firstRow, batchBegin, batchEnd,
                    hBegin, hEnd);
    }
    __syncthreads(); // the list is free for the next batch
    batchBegin = batchEnd;
  }
}

bool isVectorAligned(const void *data, DType dtype) {
  return reinterpret_cast<uintptr_t>(data) % (kVec * dtypeSize(dtype)) == 0;
}

} // namespace

Status embedding(const EmbeddingArgs &args, DeviceStream stream) {
  SHARC_TRY(
      checkFloatStorage("embeddingKernel", {args.table.dtype, args.out.dtype}));
  if (args.numTokens <= 0 || args.hidden <= 0)
    return Status::ok();
  bool vectorized = args.hidden % kVec == 0 &&
                    isVectorAligned(args.table.data, args.table.dtype) &&
                    isVectorAligned(args.out.data, args.out.dtype);
  embeddingKernel<<<static_cast<unsigned>(args.numTokens), kThreads, 0,
                    stream>>>(args.table, args.ids, args.out, args.numRows,
                              args.hidden, args.vocabStart, vectorized);
  return launchStatus("embeddingKernel");
}

Status embeddingGrad(const EmbeddingGradArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("embeddingGradKernel",
                              {args.dout.dtype, args.dtable.dtype}));
  if (args.numRows <= 0 || args.hidden <= 0)
    return Status::ok();
  // About kListCapacity / 2 expected hits per block: one batch in the
  // common case, and few blocks re-reading ids; but fewer rows where that
  // would leave SMs idle (8192 tokens over 6400 rows of 768 gave 13 blocks
  // of 512 rows: 171 us on an H200). The partition leaves the bits alone:
  // every output is summed in token order either way.
  int numSms = 0;
  SHARC_TRY(multiprocessorCount(numSms));
  int64_t hiddenTiles = ceilDiv(args.hidden, kHiddenTile);
  int64_t rowsForHalfList = std::min(
      kListCapacity / 2 * args.numRows / std::max<int64_t>(1, args.numTokens),
      ceilDiv(args.numRows * hiddenTiles, 4 * static_cast<int64_t>(numSms)));
  GradShape shape{args.numTokens,
                  args.numRows,
                  args.hidden,
                  args.vocabStart,
                  static_cast<int>(std::clamp<int64_t>(
                      rowsForHalfList, kMinBlockRows, kMaxBlockRows)),
                  args.hidden % kVec == 0 &&
                      isVectorAligned(args.dout.data, args.dout.dtype) &&
                      isVectorAligned(args.dtable.data, args.dtable.dtype)};
  dim3 grid(static_cast<unsigned>(ceilDiv(args.numRows, shape.rowsPerBlock)),
            static_cast<unsigned>(hiddenTiles));
  embeddingGradKernel<<<grid, kGradThreads, 0, stream>>>(args.dout, args.ids,
                                                         args.dtable, shape);
  return launchStatus("embeddingGradKernel");
}

} // namespace sharc::kernels::cuda
