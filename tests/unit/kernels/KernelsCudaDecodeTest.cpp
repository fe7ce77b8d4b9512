//===- KernelsCudaDecodeTest.cpp - cuda decode attention against the cpu --===//
//
// cuda::decodeAttention against cpu::decodeAttention on the same stored
// inputs: caches filled with random values, samples at different positions
// (the first, one inside, the last, either side of a chunk's edge), head
// dims that are no power of two and the largest (256), a cache of 313
// chunks (in runs of 2 a block), groups of 1 to 40 query heads (more than a
// block's 32 queries), caches of one chunk (no merge) and queries finished
// in the first run beside merged ones, and steps of several positions a
// sample (a prompt's chunk, and prefills of 64 rows padded with their last
// position as the runtime pads, one in runs of 4 chunks). The grids those
// shapes make are checked in tests/unit/plan/DeviceWorkspaceTest.cpp, so
// that the cases stay what they say. The output and the scratch start
// poisoned (NaN), so an element never written, or a run the merge reads but
// no block wrote, fails.
//
//===----------------------------------------------------------------------===//

#include "kernels/DecodeAttention.h"
#include "tests/unit/kernels/CudaPairs.h"
#if SHARC_WITH_CUDNN
#include "kernels/cuda/CudnnAttention.h"
#include "kernels/cuda/DeviceInfo.h"
#include "planner/plan/DeviceWorkspace.h"
#endif

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <vector>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

namespace {

struct DecodeShape {
  int64_t cacheLen, batch, numHeads, numKvHeads, headDim;
  std::vector<int32_t> positions; ///< [T, B]
  int64_t chunksPerSplit = 0;     ///< 0: decodeGrid's choice
};

/// 64 rows of `batch` samples at positions first.. up to last, which the
/// rows after it repeat (the runtime's padding).
DecodeShape prefillShape(int64_t cacheLen, int64_t batch, int64_t numHeads,
                         int64_t numKvHeads, int64_t headDim, int32_t first,
                         int32_t last, int64_t chunksPerSplit = 0) {
  DecodeShape shape{cacheLen, batch, numHeads, numKvHeads, headDim, {}};
  shape.chunksPerSplit = chunksPerSplit;
  for (int32_t t = 0; t < 64; ++t)
    for (int64_t b = 0; b < batch; ++b)
      shape.positions.push_back(std::min(first + t, last));
  return shape;
}

/// Runs the device side: the decode kernels, or with `engine` cuDNN's
/// prefill path (the staging and workspace it asks, poisoned).
using DeviceRun = std::function<Status(const DecodeAttentionArgs &)>;

Status runKernels(const DecodeAttentionArgs &args) {
  DeviceBuffer scratch(cuda::decodeAttentionScratchBytes(args));
  scratch.poison();
  DecodeAttentionArgs withScratch = args;
  withScratch.scratch = scratch.data();
  return cuda::decodeAttention(withScratch, nullptr);
}

void checkDecode(DType dtype, const DecodeShape &shape, std::mt19937 &rng,
                 const DeviceRun &runDevice = runKernels) {
  int64_t rows = static_cast<int64_t>(shape.positions.size()) / shape.batch;
  int64_t qNumel = rows * shape.batch * shape.numHeads * shape.headDim;
  int64_t kvNumel = rows * shape.batch * shape.numKvHeads * shape.headDim;
  int64_t cacheNumel =
      shape.cacheLen * shape.batch * shape.numKvHeads * shape.headDim;
  // A row repeating an earlier row's position (the runtime's padding)
  // brings that row's query, key and value, as the runtime's repeated
  // token does (the kernels require the key and value, cuDNN's path all).
  auto repeated = [&](std::vector<double> values, int64_t heads) {
    int64_t width = heads * shape.headDim;
    for (int64_t n = 0; n < rows * shape.batch; ++n)
      for (int64_t m = n % shape.batch; m < n; m += shape.batch)
        if (shape.positions[m] == shape.positions[n]) {
          std::copy_n(values.begin() + m * width, width,
                      values.begin() + n * width);
          break;
        }
    return values;
  };
  Pair q(dtype, repeated(randomValues(qNumel, rng, 2.0), shape.numHeads));
  Pair k(dtype, repeated(randomValues(kvNumel, rng, 2.0), shape.numKvHeads));
  Pair v(dtype, repeated(randomValues(kvNumel, rng), shape.numKvHeads));
  Pair kCache(dtype, randomValues(cacheNumel, rng, 2.0));
  Pair vCache(dtype, randomValues(cacheNumel, rng));
  Pair out(dtype, qNumel);
  IntPair positions(shape.positions);
  auto args = [&](bool onDevice) {
    return DecodeAttentionArgs{.q = q.in(onDevice),
                               .k = k.in(onDevice),
                               .v = v.in(onDevice),
                               .kCache = kCache.out(onDevice),
                               .vCache = vCache.out(onDevice),
                               .positions = positions.on(onDevice),
                               .out = out.out(onDevice),
                               .batch = shape.batch,
                               .numHeads = shape.numHeads,
                               .numKvHeads = shape.numKvHeads,
                               .headDim = shape.headDim,
                               .cacheLen = shape.cacheLen,
                               .theta = 1e6,
                               .rows = rows,
                               .chunksPerSplit = shape.chunksPerSplit};
  };
  cpu::decodeAttention(args(false));
  requireRan(runDevice(args(true)));
  double bound = tolerance(dtype, 1e-5);
  out.requireMatch(bound);
  // The new rows: rope's cos and sin may differ by an ulp; the rest of the
  // caches is untouched on both sides.
  kCache.requireMatch(bound);
  vCache.requireMatch(0.0);
}

} // namespace

TEST_CASE("cuda::decodeAttention matches cpu::decodeAttention", "[gpu]") {
  std::mt19937 rng(41);
  std::vector<DecodeShape> shapes = {
      {37, 3, 8, 4, 96, {0, 17, 36}},
      {300, 2, 4, 1, 64, {299, 128}},
      // Positions 63, 64 and 65: a chunk's last, the next one's first and
      // second (kDecodeChunk is 64).
      {130, 3, 4, 2, 96, {63, 64, 65}},
      {5, 1, 2, 2, 6, {4}},
      // 313 chunks, of which the last holds 32 positions, in runs of 2.
      {20000, 1, 2, 1, 64, {19999}, 2},
      // Chunks: 4 rows of 3 samples at consecutive positions (the third
      // sample's at the cache's end), 2 rows of one sample at its start.
      {40, 3, 8, 4, 96, {0, 17, 36, 1, 18, 37, 2, 19, 38, 3, 20, 39}},
      {9, 1, 2, 2, 6, {0, 1}},
      // Head dim 256 (the kernel's largest), a group of 16 query heads (a
      // block takes 2 rows of them), 3 rows of 2 samples at different
      // chunks.
      {200, 2, 16, 1, 256, {70, 150, 71, 151, 72, 199}},
      // 40 heads over 1 KV head: more than one block's 32 queries a group.
      {66, 1, 40, 1, 8, {65}},
      // A prefill's 64 rows from position 100 (two query tiles of 32 rows
      // over a group of 1, one of which crosses from chunk 1 into chunk
      // 2), the last 5 rows repeating position 158 as the runtime pads.
      prefillShape(300, 1, 4, 4, 64, 100, 158),
      // 64 rows of 2 samples over groups of 4 (8 rows a tile), 32 chunks
      // in runs of 4, rows ending in different chunks of a run.
      prefillShape(2000, 2, 8, 2, 96, 1500, 1563, 4),
  };
  for (DType dtype : kFloatTypes)
    for (const DecodeShape &shape : shapes) {
      INFO(dtypeName(dtype) << " cache " << shape.cacheLen << " batch "
                            << shape.batch << " heads " << shape.numHeads << "/"
                            << shape.numKvHeads << " dim " << shape.headDim);
      checkDecode(dtype, shape, rng);
    }
}

#if SHARC_WITH_CUDNN
TEST_CASE("cuDNN's prefill matches cpu::decodeAttention", "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  auto engine = cuda::CudnnAttention::create(nullptr);
  REQUIRE(engine);
  auto runPrefill = [&](const DecodeAttentionArgs &args) -> Status {
    REQUIRE(cuda::CudnnAttention::accepts(args));
    Result<int64_t> bytes = (*engine)->prepare(args);
    if (!bytes)
      return bytes.status();
    // The compiler's prediction (plan/DeviceWorkspace): the staging, then
    // cuDNN's workspace.
    CHECK(*bytes == decodePrefillStagingBytes(args.rows, args.batch,
                                              args.numHeads, args.headDim, 2) +
                        plan::kCudnnPrefillWorkspaceBytes);
    DeviceBuffer scratch(*bytes);
    scratch.poison();
    return (*engine)->run(args, scratch.data());
  };
  // Two samples of 16 rows: the first from position 0 (an empty cache
  // before it), the second from 37 to 45 then repeating it.
  DecodeShape twoSamples{300, 2, 8, 2, 64, {}};
  for (int32_t t = 0; t < 16; ++t)
    for (int32_t first : {0, 37})
      twoSamples.positions.push_back(first == 0 ? t : std::min(37 + t, 45));
  std::vector<DecodeShape> shapes = {
      // MiniMind's heads: 64 rows from position 100, the last 5 padding.
      prefillShape(300, 1, 8, 2, 64, 100, 158),
      twoSamples,
      // Head dim 128, a group of 1, 64 rows from the cache's start.
      prefillShape(64, 1, 4, 4, 128, 0, 63),
      // Head dim 96 over a group of 4, two samples at a 4096-position
      // cache's far end.
      prefillShape(4096, 2, 8, 2, 96, 4000, 4095),
  };
  std::mt19937 rng(43);
  for (const DecodeShape &shape : shapes) {
    INFO("cache " << shape.cacheLen << " batch " << shape.batch << " heads "
                  << shape.numHeads << "/" << shape.numKvHeads << " dim "
                  << shape.headDim);
    checkDecode(DType::BF16, shape, rng, runPrefill);
  }
  // One row, f32 and head dims past 128 stay with the decode kernels.
  DecodeAttentionArgs one{.q = {nullptr, DType::BF16},
                          .k = {nullptr, DType::BF16},
                          .v = {nullptr, DType::BF16},
                          .kCache = {nullptr, DType::BF16},
                          .vCache = {nullptr, DType::BF16},
                          .out = {nullptr, DType::BF16},
                          .headDim = 64,
                          .rows = 1};
  CHECK_FALSE(cuda::CudnnAttention::accepts(one));
  one.rows = 64;
  CHECK(cuda::CudnnAttention::accepts(one));
  one.headDim = 256;
  CHECK_FALSE(cuda::CudnnAttention::accepts(one));
  one.headDim = 64;
  one.kCache.dtype = DType::F32;
  CHECK_FALSE(cuda::CudnnAttention::accepts(one));
}
#endif
