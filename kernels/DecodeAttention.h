//===- DecodeAttention.h - a new position against the key/value cache -*- C++
//-*-===//
// defines: DecodeAttentionArgs, decodeAttention (cpu::, cuda::),
//          kDecodeChunk, DecodeGrid, decodeGrid, decodeAttentionScratchBytes
//
// One step of generation with a key/value cache (`sharc compile --decode`):
// each sample brings T new positions (1 a token; a prompt's chunk with
// --prefill-rows). q is [T, B, Hq * D], k and v are [T, B, Hkv * D], the
// caches [C, B, Hkv * D] (C positions, sequence first as every
// activation), positions [T, B] int32 with 0 <= p < C (the runtime checks
// them). First, for every row t and sample b, with p = positions[t, b]:
//   k' = rope(k_tb, p)                      kernels/Rope.h's rotation and
//        fp32 tables, rounded to the storage type as rope's output is
//   kCache[p, b] = k',  vCache[p, b] = v_tb
// then, with q' = rope(q_tb, p) rounded likewise:
//   out[t, b, h] = sum_{s <= p} softmax_s(q'_h . kCache[s, b, g] / sqrt(D))
//                  * vCache[s, b, g],   g = h / (Hq / Hkv)
// so a chunk of consecutive positions attends causally within itself. Two
// rows of one sample at the same position must bring the same k and v (the
// runtime allows a repeated position only with its token repeated).
// in fp32 (f64 for the tests' reference), the softmax over the scores less
// their maximum. Positions after p are never read, so a cache needs no
// clearing between prompts; the training forward computes the same
// numbers for the same tokens (rope, then causal attention).
//
// On the device the cache is read in chunks of kDecodeChunk positions by
// blocks of up to 32 queries that share a KV head (rows of a sample times
// heads of a group), so a prefill's rows read each chunk once between
// them, and a long cache is split into runs of chunks over more blocks
// (DecodeGrid), each run leaving every query's maximum score, sum of
// exponentials and unnormalised output in fp32 scratch
// (decodeAttentionScratchBytes), merged by log-sum-exp after. The device
// takes head dims up to 256. The cpu ignores `scratch`.
//
// A bf16 step of several rows (a prefill) at a head dim cuDNN's flash
// attention takes goes through cuDNN's SDPA instead (CudnnAttention's
// decode path): the cache write as above, which also stores the rotated
// queries and each sample's query and key counts in the staging memory of
// decodePrefillStagingBytes, then the SDPA over the caches with a padding
// mask and the causal diagonal aligned bottom-right (query i of a sample
// with n rows up to position P sees keys j <= P - n + 1 + i), then the rows
// past a sample's n copy its last one. So on that path each sample's rows
// must be consecutive positions, the rows after its last position
// repeating that row whole (token, position), as Runtime::setPrefillStep
// checks and the generation's prefill passes are.
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

#include <cstdint>

namespace sharc::kernels {

struct DecodeAttentionArgs {
  ConstTensorView q, k, v;
  TensorView kCache, vCache;
  const int32_t *positions = nullptr;
  TensorView out;
  int64_t batch = 0, numHeads = 0, numKvHeads = 0, headDim = 0;
  int64_t cacheLen = 0;
  double theta = 1e6;
  int64_t rows = 1;           ///< T: positions per sample this step
  void *scratch = nullptr;    ///< device only, of decodeAttentionScratchBytes
  int64_t chunksPerSplit = 0; ///< device only: 0 is decodeGrid's choice
};

/// Positions of the cache a device block reads at a time.
inline constexpr int64_t kDecodeChunk = 64;
/// Queries a device block takes: rows of one sample times query heads of
/// one KV head's group.
inline constexpr int64_t kDecodeMaxQueries = 32;
/// The largest head dim the device kernel takes (a thread keeps 8 columns
/// of 4 queries' outputs).
inline constexpr int64_t kDecodeMaxDeviceHeadDim = 256;
/// The scratch a step's runs may take before chunks are grouped into runs
/// of several (a prefill of 512 rows over 8 heads at head dim 96 takes
/// 1.6 MB a run: 41 runs; kDecodeTargetBlocks stops it at 16 first, but
/// not at head dim 256).
inline constexpr int64_t kDecodeScratchCap = int64_t{64} << 20;

/// The blocks a step's chunks are spread over before runs take several
/// chunks each: about 8 of the chunk kernel's blocks an SM on a 132-SM
/// card, two waves at the 6 a block's shared memory lets one SM hold.
inline constexpr int64_t kDecodeTargetBlocks = 2048;

/// How the device divides one step: query tiles of `heads` x `rows` (of
/// `tiles` in all), and the cache's `chunks` into `splits` runs of
/// `chunksPerSplit`, a block per tile and run. A run is one chunk (the
/// most blocks, the causal prefill's work spread evenly) while the grid
/// stays within kDecodeTargetBlocks, and longer past it, or where the runs'
/// partials would pass kDecodeScratchCap: fewer partials to write and
/// merge once the card is full; a block walks its run's chunks with a
/// running maximum. Each query's runs are merged by log-sum-exp,
/// unless its positions fall in the first run alone. `chunksPerSplit` > 0
/// asks for runs of that many (the tests' way to reach longer runs).
struct DecodeGrid {
  int64_t heads = 1, rows = 1, headTiles = 1, rowTiles = 1, tiles = 1;
  int64_t chunks = 1, splits = 1, chunksPerSplit = 1;
};

constexpr int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

constexpr DecodeGrid decodeGrid(int64_t rows, int64_t batch, int64_t numHeads,
                                int64_t numKvHeads, int64_t headDim,
                                int64_t cacheLen, int64_t chunksPerSplit = 0) {
  DecodeGrid grid;
  rows = rows > 0 ? rows : 1;
  batch = batch > 0 ? batch : 1;
  numKvHeads = numKvHeads > 0 ? numKvHeads : 1;
  int64_t group = numHeads / numKvHeads > 0 ? numHeads / numKvHeads : 1;
  grid.heads = group < kDecodeMaxQueries ? group : kDecodeMaxQueries;
  int64_t rowsFit = kDecodeMaxQueries / grid.heads;
  grid.rows = rows < rowsFit ? rows : rowsFit;
  grid.headTiles = ceilDiv(group, grid.heads);
  grid.rowTiles = ceilDiv(rows, grid.rows);
  grid.tiles = batch * numKvHeads * grid.headTiles * grid.rowTiles;
  grid.chunks = ceilDiv(cacheLen > 0 ? cacheLen : 1, kDecodeChunk);
  if (chunksPerSplit <= 0) {
    int64_t perRun = rows * batch * group * numKvHeads * (headDim + 2) * 4;
    int64_t runs = kDecodeScratchCap / (perRun > 0 ? perRun : 1);
    int64_t fill = kDecodeTargetBlocks / grid.tiles;
    runs = runs < fill ? runs : fill;
    runs = runs < grid.chunks ? (runs > 0 ? runs : 1) : grid.chunks;
    chunksPerSplit = ceilDiv(grid.chunks, runs);
  }
  grid.chunksPerSplit =
      chunksPerSplit < grid.chunks ? chunksPerSplit : grid.chunks;
  grid.splits = ceilDiv(grid.chunks, grid.chunksPerSplit);
  return grid;
}

/// Each (row, sample, query head, run): headDim output columns, the run's
/// maximum score and its sum of exponentials, in fp32; none with one run.
/// Fixed by the sizes alone, so the compiler's report predicts it
/// (plan/DeviceWorkspace).
constexpr int64_t decodeAttentionScratchBytes(int64_t rows, int64_t batch,
                                              int64_t numHeads,
                                              int64_t numKvHeads,
                                              int64_t headDim, int64_t cacheLen,
                                              int64_t chunksPerSplit = 0) {
  int64_t splits = decodeGrid(rows, batch, numHeads, numKvHeads, headDim,
                              cacheLen, chunksPerSplit)
                       .splits;
  return splits > 1 ? rows * batch * numHeads * splits * (headDim + 2) * 4 : 0;
}

/// Whether a step goes through cuDNN's prefill path (where the backend has
/// cuDNN): several rows, bf16 throughout, a head dim its flash kernels take
/// (CudnnAttention::accepts); the planner predicts its scratch by the same.
constexpr bool decodePrefillOnCudnn(int64_t rows, bool allBf16,
                                    int64_t headDim) {
  return rows > 1 && allBf16 && headDim % 8 == 0 && headDim <= 128;
}

/// cuDNN's prefill path: the rotated queries ([T, B, Hq * D] in the
/// storage type) at the start, then each sample's query count and key
/// count (int32 [B] each), every piece at a 256-byte boundary.
constexpr int64_t decodePrefillQueryBytes(int64_t rows, int64_t batch,
                                          int64_t numHeads, int64_t headDim,
                                          int64_t elementBytes) {
  return ceilDiv(rows * batch * numHeads * headDim * elementBytes, 256) * 256;
}
constexpr int64_t decodePrefillStagingBytes(int64_t rows, int64_t batch,
                                            int64_t numHeads, int64_t headDim,
                                            int64_t elementBytes) {
  return decodePrefillQueryBytes(rows, batch, numHeads, headDim, elementBytes) +
         2 * ceilDiv(batch * 4, 256) * 256;
}

namespace cpu {
void decodeAttention(const DecodeAttentionArgs &args);
} // namespace cpu

namespace cuda {
Status decodeAttention(const DecodeAttentionArgs &args, DeviceStream stream);
int64_t decodeAttentionScratchBytes(const DecodeAttentionArgs &args);
/// cuDNN's prefill path around its SDPA: first the cache write, the
/// rotated queries and the counts into `staging`
/// (decodePrefillStagingBytes); after it, the padding rows' copies.
Status decodePrefillStage(const DecodeAttentionArgs &args, void *staging,
                          DeviceStream stream);
Status decodePrefillRepeat(const DecodeAttentionArgs &args, void *staging,
                           DeviceStream stream);
} // namespace cuda

} // namespace sharc::kernels
