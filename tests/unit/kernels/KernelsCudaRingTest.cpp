//===- KernelsCudaRingTest.cpp - ring attention's kernels, cuda vs cpu ----===//
//
// cuda::attention and cuda::attentionGrad on one key block (keyStart; the
// block all seen, or causal on the diagonal), the backward with dlse, and
// cuda::lseMerge / lseMergeGrad, against cpu:: on the same stored inputs,
// with block lengths that are not tile multiples. Outputs start poisoned
// (NaN), so an element a kernel skips fails. Balanced blocks (two chunks of
// queries on two of keys, masked by global positions, rows that see no key)
// against cpu:: as well.
//
//===----------------------------------------------------------------------===//

#include "kernels/Attention.h"
#include "kernels/LseMerge.h"
#include "tests/unit/kernels/CudaPairs.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

namespace {

struct BlockShape {
  int64_t blockLen, batch, numHeads, numKvHeads, headDim;
  int64_t queryBlock, keyBlock; ///< key block <= query block
  std::string name() const {
    return "block " + std::to_string(blockLen) + ", batch " +
           std::to_string(batch) + ", heads " + std::to_string(numHeads) + "/" +
           std::to_string(numKvHeads) + ", headDim " + std::to_string(headDim) +
           ", queries of block " + std::to_string(queryBlock) +
           " on keys of block " + std::to_string(keyBlock);
  }
};

// 37 and 70 rows cross tile edges (64 forward, 32 for dk/dv); each shape
// once on an earlier block (every key seen) and once on its own (causal).
const std::vector<BlockShape> kShapes = {
    {37, 2, 4, 2, 64, 3, 1},  {37, 2, 4, 2, 64, 3, 3}, {70, 2, 3, 1, 128, 2, 0},
    {70, 2, 3, 1, 128, 1, 1}, {33, 3, 4, 4, 40, 1, 0}, {33, 3, 4, 4, 40, 2, 2}};

float *floats(Pair &pair, bool onDevice) {
  return static_cast<float *>(pair.out(onDevice).data);
}
const float *floats(const Pair &pair, bool onDevice) {
  return static_cast<const float *>(pair.in(onDevice).data);
}

/// A balanced block (kernels/SequencePositions.h): rank `rank` of `size`
/// holds query chunks rank and 2 size - 1 - rank, of `chunk` rows each, and
/// the K/V block of rank `keyRank` holds that rank's two chunks.
struct BalancedShape {
  int64_t chunk, batch, numHeads, numKvHeads, headDim;
  int64_t size, rank, keyRank;
  int64_t rows() const { return 2 * chunk; }
  RowPositions queries() const {
    return rowPositions(SequenceSplit::Balanced, rank, size, rows());
  }
  RowPositions keys() const {
    return rowPositions(SequenceSplit::Balanced, keyRank, size, rows());
  }
  std::string name() const {
    return "chunk " + std::to_string(chunk) + ", batch " +
           std::to_string(batch) + ", heads " + std::to_string(numHeads) + "/" +
           std::to_string(numKvHeads) + ", headDim " + std::to_string(headDim) +
           ", cp " + std::to_string(size) + ", rank " + std::to_string(rank) +
           " on the keys of rank " + std::to_string(keyRank);
  }
};

// Chunks of 37 and 70 rows put the chunk boundary inside a 64-row tile (and
// a 32-row one for dk/dv). Each own block (causal pairs, a full pair, a
// masked one), an earlier rank's (the late key chunk seen by nobody) and a
// later rank's (the early query chunk sees no key: out 0, lse empty).
const std::vector<BalancedShape> kBalancedShapes = {
    {37, 2, 4, 2, 64, 2, 0, 0},  {37, 2, 4, 2, 64, 2, 0, 1},
    {37, 2, 4, 2, 64, 2, 1, 0},  {70, 1, 3, 1, 128, 3, 1, 1},
    {70, 1, 3, 1, 128, 3, 1, 2}, {70, 1, 3, 1, 128, 3, 2, 0},
    {33, 3, 4, 4, 40, 4, 3, 3},  {33, 3, 4, 4, 40, 4, 0, 3}};

/// The device lse against the cpu's: rows that see no key exactly
/// kEmptyRowLse on both, the others within `maxError` (normwise over them:
/// the empty rows' 1e30 would hide any error).
void requireLseMatch(const Pair &lse, double maxError) {
  std::vector<double> device = lse.deviceCopy().values();
  std::vector<double> host = lse.host().values();
  std::vector<double> deviceSeen, hostSeen;
  int64_t numEmpty = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    INFO("lse row " << i);
    REQUIRE_FALSE(std::isnan(device[i]));
    if (host[i] == kEmptyRowLse) {
      REQUIRE(device[i] == kEmptyRowLse);
      ++numEmpty;
    } else {
      deviceSeen.push_back(device[i]);
      hostSeen.push_back(host[i]);
    }
  }
  INFO(numEmpty << " empty rows");
  REQUIRE(maxRelativeError(deviceSeen, hostSeen) <= maxError);
}

/// cuda::attention and cuda::attentionGrad (with dlse) on random q, k, v of
/// `extent` against cpu:: on the same stored inputs; the backward reads the
/// cpu's forward on both sides.
void requireBlockMatchesCpu(DType dtype, const AttentionExtent &extent,
                            std::mt19937 &rng) {
  int64_t qNumel =
      extent.seqLen * extent.batch * extent.numHeads * extent.headDim;
  int64_t kvNumel =
      extent.kvSeqLen * extent.batch * extent.numKvHeads * extent.headDim;
  int64_t lseNumel = extent.batch * extent.numHeads * extent.seqLen;
  Pair q(dtype, randomValues(qNumel, rng, 2.0));
  Pair k(dtype, randomValues(kvNumel, rng, 2.0));
  Pair v(dtype, randomValues(kvNumel, rng));
  Pair out(dtype, qNumel), lse(DType::F32, lseNumel);
  auto forward = [&](bool onDevice) {
    return withExtent(AttentionArgs{.q = q.in(onDevice),
                                    .k = k.in(onDevice),
                                    .v = v.in(onDevice),
                                    .out = out.out(onDevice),
                                    .lse = floats(lse, onDevice)},
                      extent);
  };
  cpu::attention(forward(false));
  requireRan(cuda::attention(forward(true), nullptr));
  out.requireMatch(tolerance(dtype, 1e-4));
  requireLseMatch(lse, tolerance(dtype, 1e-5));

  Pair outIn(dtype, out.host().values()),
      lseIn(DType::F32, lse.host().values());
  Pair dout(dtype, randomValues(qNumel, rng));
  Pair dlse(DType::F32, randomValues(lseNumel, rng));
  Pair dq(dtype, qNumel), dk(dtype, kvNumel), dv(dtype, kvNumel);
  auto backward = [&](bool onDevice) {
    return withExtent(AttentionGradArgs{.q = q.in(onDevice),
                                        .k = k.in(onDevice),
                                        .v = v.in(onDevice),
                                        .out = outIn.in(onDevice),
                                        .dout = dout.in(onDevice),
                                        .lse = floats(lseIn, onDevice),
                                        .dlse = floats(dlse, onDevice),
                                        .dq = dq.out(onDevice),
                                        .dk = dk.out(onDevice),
                                        .dv = dv.out(onDevice)},
                      extent);
  };
  cpu::attentionGrad(backward(false));
  requireRan(cuda::attentionGrad(backward(true), nullptr));
  dq.requireMatch(tolerance(dtype, 1e-4));
  dk.requireMatch(tolerance(dtype, 1e-4));
  dv.requireMatch(tolerance(dtype, 1e-4));
}

} // namespace

TEST_CASE("cuda attention on one key block, dlse included, matches the cpu",
          "[kernels][gpu]") {
  std::mt19937 rng(51);
  for (DType dtype : kFloatTypes)
    for (const BlockShape &s : kShapes) {
      INFO(dtypeName(dtype) << ", " << s.name());
      requireBlockMatchesCpu(
          dtype,
          AttentionExtent{s.blockLen, s.batch, s.numHeads, s.numKvHeads,
                          s.headDim, s.blockLen,
                          RowPositions{s.queryBlock * s.blockLen},
                          RowPositions{s.keyBlock * s.blockLen}},
          rng);
    }
}

TEST_CASE("cuda attention on balanced blocks masks by global positions like "
          "the cpu",
          "[kernels][gpu]") {
  std::mt19937 rng(53);
  for (DType dtype : kFloatTypes)
    for (const BalancedShape &s : kBalancedShapes) {
      INFO(dtypeName(dtype) << ", " << s.name());
      requireBlockMatchesCpu(dtype,
                             AttentionExtent{s.rows(), s.batch, s.numHeads,
                                             s.numKvHeads, s.headDim, s.rows(),
                                             s.queries(), s.keys()},
                             rng);
    }
}

TEST_CASE("cuda attention refuses a key block after its queries",
          "[kernels][gpu]") {
  Pair q(DType::F32, 8 * 64), k(DType::F32, 8 * 64), v(DType::F32, 8 * 64);
  Pair out(DType::F32, 8 * 64), lse(DType::F32, 8);
  Status status = cuda::attention({.q = q.in(true),
                                   .k = k.in(true),
                                   .v = v.in(true),
                                   .out = out.out(true),
                                   .lse = floats(lse, true),
                                   .seqLen = 8,
                                   .batch = 1,
                                   .numHeads = 1,
                                   .numKvHeads = 1,
                                   .headDim = 64,
                                   .kvSeqLen = 8,
                                   .queryStart = 8,
                                   .keyStart = 16},
                                  nullptr);
  REQUIRE_FALSE(status.isOk());
}

TEST_CASE("cuda lse_merge and its gradient match the cpu", "[kernels][gpu]") {
  std::mt19937 rng(52);
  constexpr int64_t seqLen = 37, batch = 3, heads = 5, dim = 40;
  constexpr int64_t numel = seqLen * batch * heads * dim;
  constexpr int64_t rows = batch * heads * seqLen;
  for (DType dtype : kFloatTypes) {
    INFO(dtypeName(dtype));
    std::vector<double> lseB = randomValues(rows, rng, 3.0);
    lseB[7] = kEmptyRowLse; // a row the second part never saw
    Pair outA(dtype, randomValues(numel, rng)),
        outB(dtype, randomValues(numel, rng));
    Pair lseA(DType::F32, randomValues(rows, rng, 3.0)),
        lseBPair(DType::F32, lseB);
    Pair out(dtype, numel), lse(DType::F32, rows);
    auto merge = [&](bool onDevice) {
      return LseMergeArgs{.outA = outA.in(onDevice),
                          .outB = outB.in(onDevice),
                          .lseA = floats(lseA, onDevice),
                          .lseB = floats(lseBPair, onDevice),
                          .out = out.out(onDevice),
                          .lse = floats(lse, onDevice),
                          .seqLen = seqLen,
                          .batch = batch,
                          .numHeads = heads,
                          .headDim = dim};
    };
    cpu::lseMerge(merge(false));
    requireRan(cuda::lseMerge(merge(true), nullptr));
    out.requireMatch(tolerance(dtype, 1e-6));
    lse.requireMatch(1e-6);

    Pair outIn(dtype, out.host().values()),
        lseIn(DType::F32, lse.host().values());
    Pair dout(dtype, randomValues(numel, rng)),
        dlse(DType::F32, randomValues(rows, rng));
    for (int part = 0; part < 2; ++part) {
      INFO("part " << part);
      const Pair &mine = part == 0 ? outA : outB;
      const Pair &mineLse = part == 0 ? lseA : lseBPair;
      Pair dpart(dtype, numel), dlsePart(DType::F32, rows);
      auto grad = [&](bool onDevice) {
        return LseMergeGradArgs{.part = mine.in(onDevice),
                                .out = outIn.in(onDevice),
                                .dout = dout.in(onDevice),
                                .lsePart = floats(mineLse, onDevice),
                                .lse = floats(lseIn, onDevice),
                                .dlse = floats(dlse, onDevice),
                                .dpart = dpart.out(onDevice),
                                .dlsePart = floats(dlsePart, onDevice),
                                .seqLen = seqLen,
                                .batch = batch,
                                .numHeads = heads,
                                .headDim = dim};
      };
      cpu::lseMergeGrad(grad(false));
      requireRan(cuda::lseMergeGrad(grad(true), nullptr));
      dpart.requireMatch(tolerance(dtype, 1e-6));
      dlsePart.requireMatch(tolerance(dtype, 1e-5));
    }
  }
}
