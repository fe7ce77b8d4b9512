//===- KernelsCudaAttentionTest.cpp - cuda attention against the cpu ------===//
//
// cuda::attention and cuda::attentionGrad against cpu:: on the same stored
// inputs (tests/unit/kernels/CudaAttentionChecks.h): square shapes, query
// blocks, the balanced split's runs, v and dv as columns of wider rows,
// and the dtypes and head dims the kernels refuse. Exits 77 (ctest's skip
// code) on a machine without a device.
//
//===----------------------------------------------------------------------===//

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

TEST_CASE("cuda::attention matches cpu::attention", "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  checkForward(
      [](const AttentionArgs &args) { return cuda::attention(args, nullptr); },
      {DType::F32, DType::BF16});
}

TEST_CASE("cuda::attentionGrad matches cpu::attentionGrad", "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  checkBackward(
      [](const AttentionGradArgs &args) {
        return cuda::attentionGrad(args, nullptr);
      },
      {DType::F32, DType::BF16});
}

TEST_CASE("cuda::attention reads v and writes dv as columns of wider rows",
          "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  checkForward(withColumnV([](const AttentionArgs &args) {
                 return cuda::attention(args, nullptr);
               }),
               {DType::F32, DType::BF16});
  checkBackward(withColumnV([](const AttentionGradArgs &args) {
                  return cuda::attentionGrad(args, nullptr);
                }),
                {DType::F32, DType::BF16});
}

TEST_CASE("cuda::attention of a query block matches cpu::attention", "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  checkForward(
      [](const AttentionArgs &args) { return cuda::attention(args, nullptr); },
      {DType::F32, DType::BF16}, kBlockShapes);
}

TEST_CASE("cuda::attentionGrad of a query block matches cpu::attentionGrad",
          "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  checkBackward(
      [](const AttentionGradArgs &args) {
        return cuda::attentionGrad(args, nullptr);
      },
      {DType::F32, DType::BF16}, kBlockShapes);
}

TEST_CASE("cuda::attention and attentionGrad of ring attention's blocks "
          "match the cpu's",
          "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  checkForward(
      [](const AttentionArgs &args) { return cuda::attention(args, nullptr); },
      {DType::F32, DType::BF16}, kRingShapes);
  checkBackward(
      [](const AttentionGradArgs &args) {
        return cuda::attentionGrad(args, nullptr);
      },
      {DType::F32, DType::BF16}, kRingShapes);
}

TEST_CASE("cuda::attention of a balanced rank's queries matches "
          "cpu::attention",
          "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  checkForward(
      [](const AttentionArgs &args) { return cuda::attention(args, nullptr); },
      {DType::F32, DType::BF16}, kBalancedShapes);
}

TEST_CASE("cuda::attentionGrad of a balanced rank's queries matches "
          "cpu::attentionGrad",
          "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  checkBackward(
      [](const AttentionGradArgs &args) {
        return cuda::attentionGrad(args, nullptr);
      },
      {DType::F32, DType::BF16}, kBalancedShapes);
}

TEST_CASE("cuda::attention rejects head dims, dtypes and mixes it lacks",
          "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  DeviceBuffer buffer(4096);
  float *lse = static_cast<float *>(buffer.data());
  auto forward = [&](DType qType, DType outType, int64_t headDim) {
    return cuda::attention({.q = {buffer.data(), qType},
                            .k = {buffer.data(), qType},
                            .v = {buffer.data(), qType},
                            .out = {buffer.data(), outType},
                            .lse = lse,
                            .seqLen = 4,
                            .batch = 1,
                            .numHeads = 2,
                            .numKvHeads = 1,
                            .headDim = headDim},
                           nullptr);
  };
  CHECK(forward(DType::F32, DType::F32, 100).code() ==
        Status::Code::InvalidInput);
  CHECK(forward(DType::F32, DType::F32, 136).code() ==
        Status::Code::InvalidInput);
  CHECK(forward(DType::F64, DType::F64, 64).code() ==
        Status::Code::InvalidInput);
  CHECK(forward(DType::BF16, DType::F32, 64).code() ==
        Status::Code::InvalidInput);
  Status grad = cuda::attentionGrad({.q = {buffer.data(), DType::F64},
                                     .k = {buffer.data(), DType::F64},
                                     .v = {buffer.data(), DType::F64},
                                     .out = {buffer.data(), DType::F64},
                                     .dout = {buffer.data(), DType::F64},
                                     .lse = lse,
                                     .dq = {buffer.data(), DType::F64},
                                     .dk = {buffer.data(), DType::F64},
                                     .dv = {buffer.data(), DType::F64},
                                     .seqLen = 4,
                                     .batch = 1,
                                     .numHeads = 2,
                                     .numKvHeads = 1,
                                     .headDim = 64},
                                    nullptr);
  CHECK(grad.code() == Status::Code::InvalidInput);
}
