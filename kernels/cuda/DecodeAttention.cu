//===- DecodeAttention.cu - a new position against the cache on the device ===//
//
// Implements the math stated in kernels/DecodeAttention.h in three
// launches: the cache write (grid (T * B, Hkv): each block rotates one new
// key head by its row's position and stores it and the value head into the
// caches); the chunks (decodeChunkKernel: a block takes up to 32 queries
// that share one KV head, rows of one sample times heads of one group,
// against one chunk of 64 cache positions, and leaves each query's
// maximum score, sum of exponentials and unnormalised output in fp32
// scratch; blocks whose chunk no query reaches return at once); the merge
// (grid T * B * Hq: each block rescales its head's chunks by
// exp(max_c - max) and divides by the rescaled sum). invFreq is the host's
// table (RopeFreqs.h), so the angles start from the cpu's bits; cos, sin,
// exp and the sums' order may differ from the cpu's by rounding only.
// Head dims up to 256 (every shipped model's; the training attention
// kernels take 128). cuDNN's prefill path (CudnnAttention) uses the cache
// write with staging (the rotated queries and the counts its padding mask
// reads) before its SDPA and decodeRepeatKernel after it.
//
// Why chunks and tiles: a token brings B * Hq query heads, 8 at MiniMind's
// batch 1, and one block a head walked a 3000-position cache with 8 blocks
// on 132 SMs (11 ms a token); a prefill's 64 rows each re-read the whole
// cache (docs/benchmarks.md, thirty-first session).
//
//===----------------------------------------------------------------------===//

#include "kernels/DecodeAttention.h"
#include "kernels/cuda/BlockReduce.cuh"
#include "kernels/cuda/ElementAccess.cuh"
#include "kernels/cuda/Launch.h"
#include "kernels/cuda/RopeFreqs.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace sharc::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

/// `value` rounded to the storage type of `view`, as a store then a load.
__device__ __forceinline__ float roundedLike(ConstTensorView view,
                                             float value) {
  return view.dtype == DType::BF16
             ? __bfloat162float(__float2bfloat16_rn(value))
             : value;
}

/// Where cuDNN's prefill path keeps the rotated queries and the counts
/// (kernels/DecodeAttention.h's decodePrefillStagingBytes).
struct PrefillStaging {
  TensorView queries;        ///< [T, B, Hq * D], q's storage type
  int32_t *counts = nullptr; ///< [B] query rows, then [B] keys
};

PrefillStaging prefillStaging(const DecodeAttentionArgs &args, void *staging) {
  int64_t elementBytes = args.q.dtype == DType::BF16 ? 2 : 4;
  auto *base = static_cast<char *>(staging);
  return {
      {base, args.q.dtype},
      reinterpret_cast<int32_t *>(
          base + decodePrefillQueryBytes(args.rows, args.batch, args.numHeads,
                                         args.headDim, elementBytes))};
}

/// Grid (T * B, Hkv): block (n, g) rotates row n's key head g by its
/// position into the caches and copies the value head; with `staging`
/// (cuDNN's prefill path) it also stores the rotated query heads of group
/// g, rounded to the storage type as the chunk kernel rounds them, and a
/// sample's first block its query and key counts.
__global__ void
decodeCacheWriteKernel(DecodeAttentionArgs args,
                       const __grid_constant__ RopeInvFreqs invFreq,
                       PrefillStaging staging) {
  // n = t * B + b: row t of sample b.
  int64_t n = blockIdx.x, b = n % args.batch, g = blockIdx.y;
  int64_t headDim = args.headDim, half = headDim / 2;
  int64_t kvWidth = args.numKvHeads * headDim;
  int64_t p = args.positions[n];
  if (staging.counts) {
    int64_t group = args.numHeads / args.numKvHeads;
    int64_t qWidth = args.numHeads * headDim;
    for (int64_t e = threadIdx.x; e < group * half; e += blockDim.x) {
      int64_t at = n * qWidth + (g * group + e / half) * headDim + e % half;
      float angle = static_cast<float>(p) * invFreq.values[e % half];
      float cosine = cosf(angle), sine = sinf(angle);
      float x = loadAs(args.q, at), y = loadAs(args.q, at + half);
      storeAs(staging.queries, at, x * cosine - y * sine);
      storeAs(staging.queries, at + half, y * cosine + x * sine);
    }
    if (n < args.batch && g == 0 && threadIdx.x == 0) {
      int64_t last = args.positions[(args.rows - 1) * args.batch + b];
      staging.counts[b] = static_cast<int32_t>(last - p + 1);
      staging.counts[args.batch + b] = static_cast<int32_t>(last + 1);
    }
  }
  int64_t from = n * kvWidth + g * headDim;
  int64_t to = (p * args.batch + b) * kvWidth + g * headDim;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    float angle = static_cast<float>(p) * invFreq.values[i];
    float cosine = cosf(angle), sine = sinf(angle);
    float first = loadAs(args.k, from + i);
    float second = loadAs(args.k, from + i + half);
    storeAs(args.kCache, to + i, first * cosine - second * sine);
    storeAs(args.kCache, to + i + half, second * cosine + first * sine);
  }
  if (headDim % 2 != 0 && threadIdx.x == 0)
    storeAs(args.kCache, to + headDim - 1, loadAs(args.k, from + headDim - 1));
  for (int64_t d = threadIdx.x; d < headDim; d += blockDim.x)
    storeAs(args.vCache, to + d, loadAs(args.v, from + d));
}

constexpr int kMaxQueries = static_cast<int>(kDecodeMaxQueries);
constexpr int kMaxHeadDim = static_cast<int>(kDecodeMaxDeviceHeadDim);
constexpr int kQueriesPerThread = kMaxQueries / kWarps;
constexpr int kColumnsPerThread = kMaxHeadDim / 32;
static_assert(kMaxHeadDim <= kThreads, "the merge takes a column a thread");
static_assert(kDecodeChunk == 64, "a lane takes positions lane and lane + 32");

/// Dynamic shared memory: the chunk's rows (keys, then values) padded to
/// headDim + 1 floats so that the 32 rows a warp reads at one column fall
/// in 32 banks, the rotated queries, their scores.
int64_t chunkSharedBytes(int64_t headDim) {
  return (kDecodeChunk * (headDim + 1) + kMaxQueries * headDim +
          kMaxQueries * kDecodeChunk) *
         static_cast<int64_t>(sizeof(float));
}

/// Rows [begin, begin + count) of `cache` (row j at j * rowPitch + base)
/// into the shared `rows` of `stride` floats, zeros for the chunk's rows
/// past `count`. Each thread issues a batch of loads (four elements each
/// where the head dim and the cache's address allow) before it stores any:
/// a chunk read one dependent load at a time took 25 us of a decode step's
/// 2 chunks and 280 us of a 256-row prefill's pass a layer (ncu, H100).
__device__ __forceinline__ void loadChunkRows(ConstTensorView cache,
                                              int64_t begin, int64_t count,
                                              int64_t rowPitch, int64_t base,
                                              int headDim, int stride,
                                              float *rows) {
  constexpr int kBatch = 4;
  int64_t elementBytes = cache.dtype == DType::BF16 ? 2 : 4;
  bool fours =
      headDim % 4 == 0 &&
      reinterpret_cast<uintptr_t>(cache.data) % (4 * elementBytes) == 0;
  int width = fours ? 4 : 1, perRow = headDim / width;
  int total = static_cast<int>(kDecodeChunk) * perRow;
  for (int first = threadIdx.x; first < total; first += kBatch * kThreads) {
    float values[kBatch][4] = {};
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      int e = first + u * kThreads, j = e / perRow, d = e % perRow * width;
      if (e >= total || j >= count)
        continue;
      int64_t at = (begin + j) * rowPitch + base + d;
      if (fours)
        loadVec4(cache.data, cache.dtype, at, values[u]);
      else
        values[u][0] = loadAs(cache, at);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      int e = first + u * kThreads, j = e / perRow, d = e % perRow * width;
      if (e >= total)
        continue;
      for (int x = 0; x < width; ++x)
        rows[j * stride + d + x] = values[u][x];
    }
  }
}

/// The run of chunks query `position` ends in.
__device__ __forceinline__ int64_t lastSplit(const DecodeGrid &grid,
                                             int64_t position) {
  return position / kDecodeChunk / grid.chunksPerSplit;
}

/// One run of chunks for one query tile: grid (tiles, splits), kThreads
/// threads. Per chunk, the keys come into shared memory and every query's
/// scores are formed there (a thread: 4 queries x 2 positions); each
/// query's running maximum and sum of exponentials take the chunk in (a
/// warp a query); then the values replace the keys and a thread rescales
/// and adds to its 4 queries x 8 columns of the weighted values. A query's
/// positions after its own score -inf; positions after the block's last
/// are never read (the cache's rows there may hold anything) and count as
/// zeros. A query whose positions all fall in the first run is finished
/// here (out); the others leave the run's partial in scratch.
__global__ void __launch_bounds__(kThreads)
    decodeChunkKernel(DecodeAttentionArgs args, DecodeGrid grid,
                      const __grid_constant__ RopeInvFreqs invFreq) {
  extern __shared__ float shared[];
  __shared__ int64_t position[kMaxQueries], unit[kMaxQueries];
  __shared__ float rowMax[kMaxQueries], rowSum[kMaxQueries];
  __shared__ float rescale[kMaxQueries];
  const int headDim = static_cast<int>(args.headDim), half = headDim / 2;
  const int stride = headDim + 1;
  int64_t index = blockIdx.x;
  int64_t rowTile = index % grid.rowTiles;
  index /= grid.rowTiles;
  int64_t headTile = index % grid.headTiles;
  index /= grid.headTiles;
  int64_t g = index % args.numKvHeads, b = index / args.numKvHeads;
  int64_t split = blockIdx.y, firstChunk = split * grid.chunksPerSplit;
  int64_t group = args.numHeads / args.numKvHeads;
  int64_t kvWidth = args.numKvHeads * args.headDim;
  int64_t rowPitch = args.batch * kvWidth;
  int64_t kvBase = b * kvWidth + g * args.headDim;
  float *cacheRows = shared;                        // 64 x stride
  float *query = cacheRows + kDecodeChunk * stride; // 32 x headDim
  float *scores = query + kMaxQueries * headDim;    // 32 x 64
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  if (threadIdx.x < kMaxQueries) {
    int i = threadIdx.x;
    int64_t t = rowTile * grid.rows + i / grid.heads;
    int64_t inGroup = headTile * grid.heads + i % grid.heads;
    bool real = i < grid.heads * grid.rows && t < args.rows && inGroup < group;
    int64_t n = t * args.batch + b;
    position[i] = real ? args.positions[n] : -1;
    unit[i] = n * args.numHeads + g * group + inGroup;
    rowMax[i] = -INFINITY;
    rowSum[i] = 0.0f;
  }
  __syncthreads();
  int64_t last = -1;
  for (int i = 0; i < kMaxQueries; ++i)
    last = max(last, position[i]);
  if (firstChunk * kDecodeChunk > last)
    return; // no query of the block reaches the run: the merge skips it
  int64_t endChunk = min(min(firstChunk + grid.chunksPerSplit, grid.chunks),
                         last / kDecodeChunk + 1);

#pragma unroll 4
  for (int e = threadIdx.x; e < kMaxQueries * half; e += kThreads) {
    int i = e / half, c = e % half;
    float first = 0.0f, second = 0.0f;
    if (position[i] >= 0) {
      float angle = static_cast<float>(position[i]) * invFreq.values[c];
      float cosine = cosf(angle), sine = sinf(angle);
      int64_t at = unit[i] * headDim;
      float x = loadAs(args.q, at + c), y = loadAs(args.q, at + c + half);
      first = roundedLike(args.q, x * cosine - y * sine);
      second = roundedLike(args.q, y * cosine + x * sine);
    }
    query[i * headDim + c] = first;
    query[i * headDim + c + half] = second;
  }
  float scale = 1.0f / sqrtf(static_cast<float>(headDim));
  int columns = (headDim + 31) / 32;
  float acc[kQueriesPerThread][kColumnsPerThread] = {};
  for (int64_t chunk = firstChunk; chunk < endChunk; ++chunk) {
    int64_t begin = chunk * kDecodeChunk;
    int64_t count = min(kDecodeChunk, last + 1 - begin);
    auto loadChunk = [&](ConstTensorView cache) {
      loadChunkRows(cache, begin, count, rowPitch, kvBase, headDim, stride,
                    cacheRows);
    };
    loadChunk({args.kCache.data, args.kCache.dtype});
    __syncthreads();

    float dot[kQueriesPerThread][2] = {};
    for (int d = 0; d < headDim; ++d) {
      float key0 = cacheRows[lane * stride + d];
      float key1 = cacheRows[(lane + 32) * stride + d];
#pragma unroll
      for (int k = 0; k < kQueriesPerThread; ++k) {
        float value = query[(warp + kWarps * k) * headDim + d];
        dot[k][0] += value * key0;
        dot[k][1] += value * key1;
      }
    }
#pragma unroll
    for (int k = 0; k < kQueriesPerThread; ++k) {
      int i = warp + kWarps * k;
#pragma unroll
      for (int m = 0; m < 2; ++m)
        scores[i * kDecodeChunk + lane + 32 * m] =
            begin + lane + 32 * m <= position[i] ? scale * dot[k][m]
                                                 : -INFINITY;
    }
    __syncthreads();
    // A warp per query: the running maximum takes the chunk's in, the
    // exponentials replace the scores, and the running sum is rescaled.
    for (int i = warp; i < kMaxQueries; i += kWarps) {
      float s0 = scores[i * kDecodeChunk + lane];
      float s1 = scores[i * kDecodeChunk + lane + 32];
      float top = fmaxf(s0, s1);
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2)
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, offset));
      float before = rowMax[i];
      top = fmaxf(top, before);
      // A query no position has reached yet keeps weights of 0.
      float reference = top == -INFINITY ? 0.0f : top;
      float e0 = expf(s0 - reference), e1 = expf(s1 - reference);
      scores[i * kDecodeChunk + lane] = e0;
      scores[i * kDecodeChunk + lane + 32] = e1;
      float sum = e0 + e1;
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2)
        sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      __syncwarp();
      if (lane == 0) {
        float factor = expf(before - reference);
        rowMax[i] = top;
        rowSum[i] = rowSum[i] * factor + sum;
        rescale[i] = factor;
      }
    }
    loadChunk({args.vCache.data, args.vCache.dtype});
    __syncthreads();

    float weight[kQueriesPerThread];
#pragma unroll
    for (int k = 0; k < kQueriesPerThread; ++k) {
      float factor = rescale[warp + kWarps * k];
#pragma unroll
      for (int c = 0; c < kColumnsPerThread; ++c)
        acc[k][c] *= factor;
    }
    for (int j = 0; j < count; ++j) {
#pragma unroll
      for (int k = 0; k < kQueriesPerThread; ++k)
        weight[k] = scores[(warp + kWarps * k) * kDecodeChunk + j];
#pragma unroll
      for (int c = 0; c < kColumnsPerThread; ++c) {
        if (c >= columns || lane + 32 * c >= headDim)
          continue;
        float value = cacheRows[j * stride + lane + 32 * c];
#pragma unroll
        for (int k = 0; k < kQueriesPerThread; ++k)
          acc[k][c] += weight[k] * value;
      }
    }
    // The next chunk's keys and scores overwrite these.
    if (chunk + 1 < endChunk)
      __syncthreads();
  }
#pragma unroll
  for (int k = 0; k < kQueriesPerThread; ++k) {
    int i = warp + kWarps * k;
    if (position[i] < firstChunk * kDecodeChunk)
      continue; // no position of this run: the merge does not read it
    if (lastSplit(grid, position[i]) == 0) {
      // Every position of the query is in this run: the result.
#pragma unroll
      for (int c = 0; c < kColumnsPerThread; ++c)
        if (lane + 32 * c < headDim)
          storeAs(args.out, unit[i] * headDim + lane + 32 * c,
                  acc[k][c] / rowSum[i]);
      continue;
    }
    float *partial = static_cast<float *>(args.scratch) +
                     (unit[i] * grid.splits + split) * (headDim + 2);
#pragma unroll
    for (int c = 0; c < kColumnsPerThread; ++c)
      if (lane + 32 * c < headDim)
        partial[lane + 32 * c] = acc[k][c];
    if (lane == 0) {
      partial[headDim] = rowMax[i];
      partial[headDim + 1] = rowSum[i];
    }
  }
}

/// cuDNN's prefill path, after its SDPA: grid T * B, row t of sample b
/// past the sample's query count copies the sample's last row (the SDPA
/// leaves padding rows unwritten).
__global__ void decodeRepeatKernel(DecodeAttentionArgs args,
                                   PrefillStaging staging) {
  int64_t n = blockIdx.x, t = n / args.batch, b = n % args.batch;
  int64_t count = staging.counts[b];
  if (t < count)
    return;
  int64_t width = args.numHeads * args.headDim;
  int64_t from = ((count - 1) * args.batch + b) * width;
  ConstTensorView out{args.out.data, args.out.dtype};
  for (int64_t e = threadIdx.x; e < width; e += blockDim.x)
    storeAs(args.out, n * width + e, loadAs(out, from + e));
}

/// Merges one query head's runs by log-sum-exp: grid T * B * Hq, a thread
/// a column (head dims up to kThreads). A query whose positions fall in the
/// first run alone is already finished. The runs' maximum and sum are
/// reduced over the block, then each tile of kThreads runs' weights goes
/// through shared memory and every thread adds its column of the tile's
/// runs with independent loads (one run after another left a 256-row
/// prefill's 47 runs at 35 us a layer).
__global__ void __launch_bounds__(kThreads)
    decodeMergeKernel(DecodeAttentionArgs args, DecodeGrid grid) {
  __shared__ float weight[kThreads];
  __shared__ float reduced[kWarps];
  int64_t headDim = args.headDim, unit = blockIdx.x;
  int64_t runs = lastSplit(grid, args.positions[unit / args.numHeads]) + 1;
  if (runs == 1)
    return;
  int64_t pitch = headDim + 2;
  const float *partial =
      static_cast<const float *>(args.scratch) + unit * grid.splits * pitch;
  float top = -INFINITY;
  for (int64_t r = threadIdx.x; r < runs; r += kThreads)
    top = fmaxf(top, partial[r * pitch + headDim]);
  top = blockReduce(top, MaxOp{}, reduced);
  float sum = 0.0f;
  for (int64_t r = threadIdx.x; r < runs; r += kThreads)
    sum += partial[r * pitch + headDim + 1] *
           expf(partial[r * pitch + headDim] - top);
  sum = blockReduce(sum, SumOp{}, reduced);
  float acc = 0.0f;
  int64_t d = threadIdx.x;
  for (int64_t tile = 0; tile < runs; tile += kThreads) {
    int64_t r = tile + threadIdx.x;
    weight[threadIdx.x] =
        r < runs ? expf(partial[r * pitch + headDim] - top) : 0.0f;
    __syncthreads();
    int count =
        static_cast<int>(min(static_cast<int64_t>(kThreads), runs - tile));
    if (d < headDim) {
      const float *column = partial + tile * pitch + d;
#pragma unroll 8
      for (int i = 0; i < count; ++i)
        acc += column[i * pitch] * weight[i];
    }
    __syncthreads();
  }
  if (d < headDim)
    storeAs(args.out, unit * headDim + d, acc / sum);
}

} // namespace

int64_t decodeAttentionScratchBytes(const DecodeAttentionArgs &args) {
  return kernels::decodeAttentionScratchBytes(
      args.rows, args.batch, args.numHeads, args.numKvHeads, args.headDim,
      args.cacheLen, args.chunksPerSplit);
}

Status decodeAttention(const DecodeAttentionArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("decodeAttentionKernel",
                              {args.q.dtype, args.k.dtype, args.v.dtype,
                               args.kCache.dtype, args.vCache.dtype,
                               args.out.dtype}));
  if (args.headDim > kMaxHeadDim)
    return Status::invalidInput(
        "decodeAttentionKernel: head dim " + std::to_string(args.headDim) +
        " exceeds the device maximum " + std::to_string(kMaxHeadDim));
  if (args.rows <= 0 || args.batch <= 0 || args.numHeads <= 0 ||
      args.headDim <= 0 || args.cacheLen <= 0)
    return Status::ok();
  DecodeGrid grid =
      decodeGrid(args.rows, args.batch, args.numHeads, args.numKvHeads,
                 args.headDim, args.cacheLen, args.chunksPerSplit);
  if (grid.splits > 1 && !args.scratch)
    return Status::invalidInput("decodeAttentionKernel: no scratch given");
  // 45 KiB at head dim 96, 107 KiB at 256: past the 48 KiB a kernel may
  // take without opting in.
  int64_t sharedBytes = chunkSharedBytes(args.headDim);
  SHARC_CUDA(cudaFuncSetAttribute(decodeChunkKernel,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(sharedBytes)));
  RopeInvFreqs invFreq = ropeInvFreqs(args.headDim, args.theta);
  int64_t count = args.rows * args.batch;
  decodeCacheWriteKernel<<<dim3(static_cast<unsigned>(count),
                                static_cast<unsigned>(args.numKvHeads)),
                           kThreads, 0, stream>>>(args, invFreq,
                                                  PrefillStaging{});
  SHARC_TRY(launchStatus("decodeCacheWriteKernel"));
  decodeChunkKernel<<<dim3(static_cast<unsigned>(grid.tiles),
                           static_cast<unsigned>(grid.splits)),
                      kThreads, sharedBytes, stream>>>(args, grid, invFreq);
  SHARC_TRY(launchStatus("decodeChunkKernel"));
  if (grid.splits == 1)
    return Status::ok();
  decodeMergeKernel<<<static_cast<unsigned>(count * args.numHeads), kThreads, 0,
                      stream>>>(args, grid);
  return launchStatus("decodeMergeKernel");
}

Status decodePrefillStage(const DecodeAttentionArgs &args, void *staging,
                          DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("decodeCacheWriteKernel",
                              {args.q.dtype, args.k.dtype, args.v.dtype,
                               args.kCache.dtype, args.vCache.dtype,
                               args.out.dtype}));
  if (args.rows <= 0 || args.batch <= 0 || args.numKvHeads <= 0)
    return Status::ok();
  if (!staging)
    return Status::invalidInput("decodeCacheWriteKernel: no staging given");
  decodeCacheWriteKernel<<<dim3(static_cast<unsigned>(args.rows * args.batch),
                                static_cast<unsigned>(args.numKvHeads)),
                           kThreads, 0, stream>>>(
      args, ropeInvFreqs(args.headDim, args.theta),
      prefillStaging(args, staging));
  return launchStatus("decodeCacheWriteKernel");
}

Status decodePrefillRepeat(const DecodeAttentionArgs &args, void *staging,
                           DeviceStream stream) {
  if (args.rows <= 1 || args.batch <= 0)
    return Status::ok();
  decodeRepeatKernel<<<static_cast<unsigned>(args.rows * args.batch), kThreads,
                       0, stream>>>(args, prefillStaging(args, staging));
  return launchStatus("decodeRepeatKernel");
}

} // namespace sharc::kernels::cuda
