//===- KernelsCudaDecodeTest.cpp - cuda decode attention against the cpu --===//
//
// cuda::decodeAttention against cpu::decodeAttention on the same stored
// inputs: caches filled with random values, samples at different positions
// (the first, one inside, the last), head dims that are no power of two, a
// cache long enough that its scores need more than 48 KiB of shared memory,
// and steps of several positions a sample (a prompt's chunk).
// The output starts poisoned (NaN), so an element never written fails.
//
//===----------------------------------------------------------------------===//

#include "kernels/DecodeAttention.h"
#include "tests/unit/kernels/CudaPairs.h"

#include <catch2/catch.hpp>

#include <vector>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

namespace {

struct DecodeShape {
  int64_t cacheLen, batch, numHeads, numKvHeads, headDim;
  std::vector<int32_t> positions; ///< [T, B]
};

void checkDecode(DType dtype, const DecodeShape &shape, std::mt19937 &rng) {
  int64_t rows = static_cast<int64_t>(shape.positions.size()) / shape.batch;
  int64_t qNumel = rows * shape.batch * shape.numHeads * shape.headDim;
  int64_t kvNumel = rows * shape.batch * shape.numKvHeads * shape.headDim;
  int64_t cacheNumel =
      shape.cacheLen * shape.batch * shape.numKvHeads * shape.headDim;
  Pair q(dtype, randomValues(qNumel, rng, 2.0));
  Pair k(dtype, randomValues(kvNumel, rng, 2.0));
  Pair v(dtype, randomValues(kvNumel, rng));
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
                               .rows = rows};
  };
  cpu::decodeAttention(args(false));
  requireRan(cuda::decodeAttention(args(true), nullptr));
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
      {5, 1, 2, 2, 6, {4}},
      // 20,000 scores are 80 KB: past the default 48 KiB of shared memory.
      {20000, 1, 2, 1, 64, {19999}},
      // Chunks: 4 rows of 3 samples at consecutive positions (the third
      // sample's at the cache's end), 2 rows of one sample at its start.
      {40, 3, 8, 4, 96, {0, 17, 36, 1, 18, 37, 2, 19, 38, 3, 20, 39}},
      {9, 1, 2, 2, 6, {0, 1}}};
  for (DType dtype : kFloatTypes)
    for (const DecodeShape &shape : shapes) {
      INFO(dtypeName(dtype) << " cache " << shape.cacheLen << " batch "
                            << shape.batch << " heads " << shape.numHeads << "/"
                            << shape.numKvHeads << " dim " << shape.headDim);
      checkDecode(dtype, shape, rng);
    }
}
