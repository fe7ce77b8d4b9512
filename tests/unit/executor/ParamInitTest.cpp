//===- ParamInitTest.cpp - mesh coordinates, shard slices, param init -----===//

#include "executor/ParamInit.h"
#include "executor/ShardLayout.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

using namespace sharc;
using namespace sharc::exec;

namespace {
std::vector<plan::MeshAxis> mesh(int64_t dp, int64_t tp) {
  return {{"dp", dp}, {"tp", tp}};
}

/// The dense [rows, cols] tensor, drawn element by element.
std::vector<double> dense(const plan::InitSpec &spec, uint64_t seed,
                          const std::string &name, int64_t rows, int64_t cols) {
  std::vector<double> values(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      values[r * cols + c] = initValue(spec, seed, name, r * cols + c);
  return values;
}
} // namespace

TEST_CASE("mesh coordinates put the last axis innermost", "[executor]") {
  REQUIRE(meshCoords(mesh(2, 2), 0) == std::vector<int64_t>{0, 0});
  REQUIRE(meshCoords(mesh(2, 2), 1) == std::vector<int64_t>{0, 1});
  REQUIRE(meshCoords(mesh(2, 2), 2) == std::vector<int64_t>{1, 0});
  REQUIRE(meshCoords(mesh(2, 2), 3) == std::vector<int64_t>{1, 1});
  REQUIRE(meshCoords(mesh(2, 3), 4) == std::vector<int64_t>{1, 1});
  REQUIRE(meshCoords(mesh(2, 3), 5) == std::vector<int64_t>{1, 2});
  std::vector<plan::MeshAxis> three{{"a", 2}, {"b", 3}, {"c", 2}};
  REQUIRE(meshCoords(three, 11) == std::vector<int64_t>{1, 2, 1});
  REQUIRE(meshCoords({}, 0).empty());
}

TEST_CASE("shard slices are contiguous pieces in rank order", "[executor]") {
  plan::Sharding byRows{{{"tp", 0}}};
  auto slice = shardSlice(mesh(1, 2), byRows, {8, 6}, {0, 1});
  REQUIRE(slice);
  REQUIRE(slice->localShape == std::vector<int64_t>{4, 6});
  REQUIRE(slice->start == std::vector<int64_t>{4, 0});
  // Local element (1, 2) of tp rank 1 is global (5, 2).
  REQUIRE(slice->globalIndex(1 * 6 + 2) == 5 * 6 + 2);

  // A dim split over dp and tp: tp pieces inside each dp piece.
  plan::Sharding both{{{"dp", 0}, {"tp", 0}}};
  auto quarter = shardSlice(mesh(2, 2), both, {8, 6}, {1, 0});
  REQUIRE(quarter);
  REQUIRE(quarter->localShape == std::vector<int64_t>{2, 6});
  REQUIRE(quarter->start == std::vector<int64_t>{4, 0});

  // ... or, with the order stated, dp pieces inside each tp piece (ZeRO's
  // block of a tensor-parallel shard): tp rank 0 holds rows 0..3, and its
  // dp rank 1 the rows 2 and 3 of those.
  plan::Sharding tpOuter = both;
  tpOuter.order = {"tp", "dp"};
  auto block = shardSlice(mesh(2, 2), tpOuter, {8, 6}, {1, 0});
  REQUIRE(block);
  REQUIRE(block->localShape == std::vector<int64_t>{2, 6});
  REQUIRE(block->start == std::vector<int64_t>{2, 0});
  auto last = shardSlice(mesh(2, 2), tpOuter, {8, 6}, {0, 1});
  REQUIRE(last);
  REQUIRE(last->start == std::vector<int64_t>{4, 0});

  REQUIRE(isShardOwner(mesh(2, 2), byRows, {0, 1}));
  REQUIRE_FALSE(isShardOwner(mesh(2, 2), byRows, {1, 1}));

  auto uneven = shardSlice(mesh(1, 4), byRows, {6, 6}, {0, 0});
  REQUIRE_FALSE(uneven);
  REQUIRE(uneven.status().code() == Status::Code::InvalidInput);
  auto badDim =
      shardSlice(mesh(1, 2), plan::Sharding{{{"tp", 2}}}, {8, 6}, {0, 0});
  REQUIRE_FALSE(badDim);
}

TEST_CASE("a balanced split holds chunks r and 2n-1-r, and nests tp pieces",
          "[executor]") {
  // [cp = 2, tp = 2]: 8 rows in 4 chunks of 2; cp rank 1 holds chunks 1
  // and 2 (rows 2, 3, 4, 5), then tp rank 1 the second half of those.
  std::vector<plan::MeshAxis> cpTp{{"cp", 2}, {"tp", 2}};
  plan::Sharding byCp{{{"cp", 0}}, "cp"};
  auto rank0 = shardSlice(cpTp, byCp, {8, 3}, {0, 0});
  REQUIRE(rank0);
  REQUIRE(rank0->localShape == std::vector<int64_t>{4, 3});
  // Local rows 0, 1 are global 0, 1; rows 2, 3 are global 6, 7.
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < 4; ++r)
    rows.push_back(rank0->globalIndex(r * 3 + 1) / 3);
  REQUIRE(rows == std::vector<int64_t>{0, 1, 6, 7});
  plan::Sharding both{{{"cp", 0}, {"tp", 0}}, "cp"};
  auto inner = shardSlice(cpTp, both, {8, 3}, {1, 1});
  REQUIRE(inner);
  REQUIRE(inner->localShape == std::vector<int64_t>{2, 3});
  REQUIRE(inner->globalIndex(0) == 4 * 3);
  REQUIRE(inner->globalIndex(3 + 2) == 5 * 3 + 2);

  // Scattering and gathering [S] ids round-trips and follows the chunks.
  std::vector<int32_t> ids(8);
  for (int32_t i = 0; i < 8; ++i)
    ids[i] = 10 + i;
  std::vector<int32_t> gathered(8, -1);
  for (int64_t cp = 0; cp < 2; ++cp) {
    auto slice = shardSlice(cpTp, byCp, {8}, {cp, 0});
    REQUIRE(slice);
    std::vector<int32_t> local(4);
    copyGlobalToLocal(ids.data(), DType::I32, *slice, local.data(), DType::I32);
    REQUIRE(local == (cp == 0 ? std::vector<int32_t>{10, 11, 16, 17}
                              : std::vector<int32_t>{12, 13, 14, 15}));
    copyLocalToGlobal(local.data(), DType::I32, *slice, gathered.data(),
                      DType::I32);
  }
  REQUIRE(gathered == ids);

  auto odd = shardSlice(cpTp, byCp, {6, 3}, {0, 0});
  REQUIRE_FALSE(odd); // 6 rows do not cut into 4 chunks
}

TEST_CASE("a tp shard of a parameter equals the slice of the dense one",
          "[executor]") {
  plan::InitSpec spec{"normal", 0.02};
  const std::string name = "layers.0.attn.q_proj.weight";
  std::vector<double> full = dense(spec, 42, name, 8, 6);
  for (int64_t dim : {0, 1}) {
    plan::Sharding sharding{{{"tp", dim}}};
    for (int64_t tp = 0; tp < 2; ++tp) {
      auto slice = shardSlice(mesh(1, 2), sharding, {8, 6}, {0, tp});
      REQUIRE(slice);
      std::vector<float> local(24);
      REQUIRE(initShard(spec, 42, name, *slice, local.data(), DType::F32));
      int64_t rows = dim == 0 ? 4 : 8, cols = dim == 0 ? 6 : 3;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          int64_t globalRow = dim == 0 ? tp * 4 + r : r;
          int64_t globalCol = dim == 1 ? tp * 3 + c : c;
          INFO("dim " << dim << " tp " << tp << " at " << r << "," << c);
          REQUIRE(local[r * cols + c] ==
                  static_cast<float>(full[globalRow * 6 + globalCol]));
        }
    }
  }
}

TEST_CASE("init depends on seed and name, bf16 storage rounds", "[executor]") {
  plan::InitSpec spec{"normal", 0.02};
  REQUIRE(initValue(spec, 1, "a", 0) != initValue(spec, 2, "a", 0));
  REQUIRE(initValue(spec, 1, "a", 0) != initValue(spec, 1, "b", 0));
  REQUIRE(initValue(spec, 1, "a", 3) == initValue(spec, 1, "a", 3));

  ShardSlice whole{{3, 2}, {3, 2}, {0, 0}};
  std::vector<uint16_t> bf16(6);
  REQUIRE(initShard(spec, 7, "w", whole, bf16.data(), DType::BF16));
  for (int64_t i = 0; i < 6; ++i)
    REQUIRE(bf16[i] ==
            floatToBf16(static_cast<float>(initValue(spec, 7, "w", i))));

  std::vector<float> ones(6, 0.f), zeros(6, 5.f);
  REQUIRE(initShard({"ones", 0}, 7, "n", whole, ones.data(), DType::F32));
  REQUIRE(initShard({"zeros", 0}, 7, "n", whole, zeros.data(), DType::F32));
  REQUIRE(ones == std::vector<float>(6, 1.f));
  REQUIRE(zeros == std::vector<float>(6, 0.f));

  Status bad = initShard({"xavier", 0}, 7, "n", whole, ones.data(), DType::F32);
  REQUIRE(bad.code() == Status::Code::InvalidInput);
  REQUIRE(bad.message().find("xavier") != std::string::npos);
}

TEST_CASE("normal init has mean 0 and the requested deviation", "[executor]") {
  plan::InitSpec spec{"normal", 0.02};
  const int64_t count = 100000;
  double sum = 0, sumSquares = 0;
  int64_t beyondTwoSigma = 0;
  for (int64_t i = 0; i < count; ++i) {
    double value = initValue(spec, 42, "embed_tokens.weight", i);
    sum += value;
    sumSquares += value * value;
    beyondTwoSigma += std::abs(value) > 0.04;
  }
  double mean = sum / count;
  double stddev = std::sqrt(sumSquares / count - mean * mean);
  // The standard error of the mean is 0.02 / sqrt(1e5) = 6.3e-5.
  REQUIRE(std::abs(mean) < 4e-4);
  REQUIRE(stddev == Approx(0.02).epsilon(0.02));
  // A normal puts 4.55% of its mass beyond two sigma.
  REQUIRE(static_cast<double>(beyondTwoSigma) / count ==
          Approx(0.0455).margin(0.004));
}

TEST_CASE("a large shard drawn on several threads equals the element-wise "
          "draw",
          "[executor]") {
  // Over initShard's threading threshold, split by columns so that a
  // local row is a run inside a global row.
  plan::InitSpec spec{"normal", 0.02};
  const int64_t rows = 1100, cols = 2 * 1000;
  plan::Sharding byColumns{{{"tp", 1}}};
  auto slice = shardSlice(mesh(1, 2), byColumns, {rows, cols}, {0, 1});
  REQUIRE(slice);
  REQUIRE(slice->localShape == std::vector<int64_t>{rows, cols / 2});
  std::vector<float> local(static_cast<size_t>(rows * cols / 2), -1.0f);
  REQUIRE(initShard(spec, 7, "w", *slice, local.data(), DType::F32));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols / 2; ++c)
      REQUIRE(
          local[r * (cols / 2) + c] ==
          static_cast<float>(initValue(spec, 7, "w", r * cols + cols / 2 + c)));
}

TEST_CASE("the draw's log and cosine are within a few ulp of libm's",
          "[executor]") {
  // Uniform doubles over (0, 1], the draw's own u1 and u2 among them, and
  // the edges: 1, the smallest u1 (2^-53), both sides of the fold points
  // sqrt(1/2) (log) and the quadrants and eighths of a turn (cosine).
  std::vector<double> points{1.0,
                             0x1.0p-53,
                             0.5,
                             0.25,
                             0.125,
                             0.375,
                             0.625,
                             0.75,
                             0.875,
                             0x1.6a09e667f3bccp-1,
                             0x1.6a09e667f3bcdp-1,
                             0x1.6a09e667f3bcep-1};
  for (int64_t i = 0; i < 400000; ++i)
    points.push_back(static_cast<double>((splitmix64(99 + i) >> 11) + 1) *
                     0x1.0p-53);
  for (double p : std::vector<double>(points))
    for (double step : {-1.0, 1.0})
      points.push_back(std::nextafter(p, p + step));
  double worstLog = 0, worstCos = 0;
  for (double u : points) {
    if (u <= 0 || u > 1)
      continue;
    double ulp =
        std::nextafter(std::abs(std::log(u)), 1e300) - std::abs(std::log(u));
    if (u != 1.0)
      worstLog = std::max(
          worstLog, std::abs(kernels::drawLogUnit(u) - std::log(u)) / ulp);
    else
      REQUIRE(kernels::drawLogUnit(u) == 0.0);
    if (u < 1.0)
      worstCos =
          std::max(worstCos, std::abs(kernels::drawCosTwoPi(u) -
                                      std::cos(2 * std::numbers::pi * u)));
  }
  INFO("log " << worstLog << " ulp, cosine " << worstCos);
  REQUIRE(worstLog <= 4.0);
  // libm's cos(2 pi u) carries the rounding of its argument, 2 pi u, up to
  // 4.4e-16: the two agree to that.
  REQUIRE(worstCos <= 1e-15);
  REQUIRE(kernels::drawCosTwoPi(0.0) == 1.0);
  REQUIRE(kernels::drawCosTwoPi(0.5) == -1.0);
  REQUIRE(kernels::drawCosTwoPi(0.25) == 0.0);
}

TEST_CASE("the draw gives libm's Box-Muller once rounded to f32",
          "[executor]") {
  // Before the draw had its own log and cosine, it was libm's. Rounded to
  // the f32 a parameter stores, the two differ only where a value falls
  // within a few double ulp of an f32 rounding boundary: about one in 2^27.
  uint64_t key = drawKey(42, "layers.0.mlp.down_proj.weight");
  int64_t differ = 0;
  const int64_t count = 2000000;
  for (int64_t i = 0; i < count; ++i) {
    uint64_t counter = 2 * static_cast<uint64_t>(i);
    double u1 =
        static_cast<double>((splitmix64(key + counter) >> 11) + 1) * 0x1.0p-53;
    double u2 =
        static_cast<double>(splitmix64(key + counter + 1) >> 11) * 0x1.0p-53;
    double libm = 0.02 * std::sqrt(-2.0 * std::log(u1)) *
                  std::cos(2 * std::numbers::pi * u2);
    double ours = kernels::cpu::drawNormalValue(0.02, key, i);
    REQUIRE(std::abs(ours - libm) <= 1e-15 * 0.02 * 9);
    differ += static_cast<float>(ours) != static_cast<float>(libm);
  }
  REQUIRE(differ <= 2);
}
