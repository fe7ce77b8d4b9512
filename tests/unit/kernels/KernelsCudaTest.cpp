//===- KernelsCudaTest.cpp - CUDA toolchain check against cpu::add --------===//
//
// Exits 77 (ctest's skip code for this test) on a machine without a device.
//
//===----------------------------------------------------------------------===//

#include "kernels/Elementwise.h"
#include "kernels/cuda/DeviceInfo.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <cstdlib>

using namespace sharc;
using namespace sharc::kernels;
using sharc::kernels::test::randomValues;
using sharc::kernels::test::Tensor;

TEST_CASE("a vector add on the device matches cpu::add", "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  std::mt19937 rng(51);
  const int64_t numel = 1000; // not a multiple of the 256-thread block
  Tensor a(DType::F32, randomValues(numel, rng));
  Tensor b(DType::F32, randomValues(numel, rng));
  Tensor expected(DType::F32, numel);
  cpu::add(
      {.a = a.cview(), .b = b.cview(), .y = expected.view(), .numel = numel});
  std::vector<float> actual(numel, 0.0f);
  Status status = cuda::addOnDevice(static_cast<const float *>(a.cview().data),
                                    static_cast<const float *>(b.cview().data),
                                    actual.data(), numel);
  INFO(status.message());
  REQUIRE(status.isOk());
  for (int64_t i = 0; i < numel; ++i) {
    INFO("element " << i);
    REQUIRE(actual[i] == static_cast<float>(expected.at(i)));
  }
}
