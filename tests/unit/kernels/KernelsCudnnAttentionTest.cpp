//===- KernelsCudnnAttentionTest.cpp - cuDNN's SDPA against the cpu -------===//
//
// CudnnAttention (kernels/cuda/CudnnAttention.h) against cpu::attention and
// cpu::attentionGrad (tests/unit/kernels/CudaAttentionChecks.h): square
// shapes, context parallelism's query blocks (a call over the key prefix
// they see), the balanced split's runs and ring attention's blocks
// (unmasked calls, rows that see no key), in both backward algorithms; the
// workspace it asks against the compiler's prediction; what it declines.
// Exits 77 (ctest's skip code) on a machine without a device.
//
//===----------------------------------------------------------------------===//

#if SHARC_WITH_CUDNN
#include "kernels/AttentionRuns.h"
#include "kernels/cuda/CudnnAttention.h"
#endif
#include "kernels/Attention.h"
#include "kernels/cuda/DeviceInfo.h"
#include "tests/unit/kernels/CudaAttentionChecks.h"

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>
#include <vector>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test::cuda_attention;

#if SHARC_WITH_CUDNN
// cuDNN's SDPA through CudnnAttention: prepare (at set-up), then run on a
// workspace of the prepared size, in both backward algorithms.
template <typename Args>
Status runPrepared(cuda::CudnnAttention &engine, const Args &args) {
  Result<int64_t> bytes = engine.prepare(args);
  if (!bytes)
    return bytes.status();
  DeviceBuffer workspace(std::max<int64_t>(*bytes, 1));
  workspace.poison();
  return engine.run(args, workspace.data());
}

// The square shapes, context parallelism's query blocks (a call over the
// key prefix they see, the keys after it zeroed in dk and dv, which start
// as NaN), the balanced split's two runs (the first's dk and dv staged
// and added in, or one call where the runs are adjacent) and ring
// attention's blocks (rows that see no key filled, unmasked calls).
const std::vector<const std::vector<Shape> *> kCudnnShapes = {
    &kShapes, &kBlockShapes, &kBalancedShapes, &kRingShapes};

TEST_CASE("cuDNN attention matches cpu::attention", "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  auto engine = cuda::CudnnAttention::create(nullptr);
  INFO(engine.status().message());
  REQUIRE(engine);
  for (const std::vector<Shape> *shapes : kCudnnShapes)
    checkForward(
        [&](const AttentionArgs &args) { return runPrepared(**engine, args); },
        {DType::BF16}, *shapes);
}

TEST_CASE("cuDNN attention_grad matches cpu::attentionGrad", "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  for (bool deterministic : {false, true}) {
    INFO("deterministic " << deterministic);
    auto engine = cuda::CudnnAttention::create(nullptr, deterministic);
    INFO(engine.status().message());
    REQUIRE(engine);
    for (const std::vector<Shape> *shapes : kCudnnShapes)
      checkBackward(
          [&](const AttentionGradArgs &args) {
            return runPrepared(**engine, args);
          },
          {DType::BF16}, *shapes);
  }
}

TEST_CASE("cuDNN attention reads v and writes dv as columns of wider rows",
          "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  auto engine = cuda::CudnnAttention::create(nullptr);
  INFO(engine.status().message());
  REQUIRE(engine);
  for (const std::vector<Shape> *shapes : kCudnnShapes) {
    checkForward(withColumnV([&](const AttentionArgs &args) {
                   return runPrepared(**engine, args);
                 }),
                 {DType::BF16}, *shapes);
    checkBackward(withColumnV([&](const AttentionGradArgs &args) {
                    return runPrepared(**engine, args);
                  }),
                  {DType::BF16}, *shapes);
  }
}

TEST_CASE("cuDNN attention is asked only for bf16 and head dims it has",
          "[gpu]") {
  CHECK(cuda::CudnnAttention::accepts(DType::BF16, 64));
  CHECK(cuda::CudnnAttention::accepts(DType::BF16, 128));
  CHECK_FALSE(cuda::CudnnAttention::accepts(DType::F32, 64));
  CHECK_FALSE(cuda::CudnnAttention::accepts(DType::BF16, 100));
  CHECK_FALSE(cuda::CudnnAttention::accepts(DType::BF16, 136));
}

TEST_CASE("cuDNN's backward asks for the workspace the compiler "
          "plans",
          "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  auto engine = cuda::CudnnAttention::create(nullptr);
  REQUIRE(engine);
  for (const std::vector<Shape> *shapes : kCudnnShapes)
    for (const Shape &shape : *shapes) {
      AttentionGradArgs args =
          sized(AttentionGradArgs{.q = {nullptr, DType::BF16},
                                  .k = {nullptr, DType::BF16},
                                  .v = {nullptr, DType::BF16},
                                  .out = {nullptr, DType::BF16},
                                  .dout = {nullptr, DType::BF16},
                                  .lse = nullptr,
                                  .dq = {nullptr, DType::BF16},
                                  .dk = {nullptr, DType::BF16},
                                  .dv = {nullptr, DType::BF16}},
                shape);
      Result<int64_t> bytes = (*engine)->prepare(args);
      INFO(shape.name() << ": " << bytes.status().message());
      REQUIRE(bytes);
      // The compiler's rule for this rank's calls (the planner takes the
      // largest over the ranks; planner/plan/DeviceWorkspace.h).
      auto runs = queryRuns(args);
      REQUIRE(runs);
      int64_t planned = cudnnAttentionGradRunBytes(
          *runs, shape.seqLen, shape.batch, shape.numHeads, shape.numKvHeads,
          shape.headDim);
      INFO("cuDNN asks " << *bytes << ", the compiler plans " << planned);
      // The rule is exact at the head dims models use; at head dim 40 and
      // 37 rows cuDNN 9.19 asked 128 bytes more (an H100, thirty-fourth
      // session), and such a shape then works in the stream's scratch.
      if (shape.headDim % 32 == 0)
        CHECK(*bytes == planned);
      else
        CHECK(*bytes <= planned + 256);
    }
}

TEST_CASE("cuDNN declines a backward with dlse, which then runs on sharc's "
          "kernel",
          "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  auto engine = cuda::CudnnAttention::create(nullptr);
  REQUIRE(engine);
  // A ring block that reads its own partial output takes dlse (plans
  // compiled before passes/MergedBlockGrads.cpp).
  std::vector<float> dlse(1);
  AttentionGradArgs grad =
      test::shaped(AttentionGradArgs{.q = {nullptr, DType::BF16},
                                     .k = {nullptr, DType::BF16},
                                     .v = {nullptr, DType::BF16},
                                     .out = {nullptr, DType::BF16},
                                     .dout = {nullptr, DType::BF16},
                                     .lse = nullptr,
                                     .dlse = dlse.data(),
                                     .dq = {nullptr, DType::BF16},
                                     .dk = {nullptr, DType::BF16},
                                     .dv = {nullptr, DType::BF16}},
                   {32, 2, 4, 2, 64});
  Result<int64_t> bytes = (*engine)->prepare(grad);
  REQUIRE_FALSE(bytes);
  CHECK(bytes.status().message().find("dlse") != std::string::npos);
}
#endif
