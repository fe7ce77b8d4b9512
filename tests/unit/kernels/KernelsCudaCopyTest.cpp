//===- KernelsCudaCopyTest.cpp - cuda copy2d against the cpu --------------===//
//
// cuda::copy2d against cpu::copy2d on random bytes, for every word width
// its kernel picks (16, 8, 4 bytes; odd sizes fall back to
// cudaMemcpy2DAsync) and the contiguous case: every destination byte,
// including the pitch gaps that must stay untouched, equals the cpu's.
// Exits 77 (ctest's skip code) on a machine without a device.
//
//===----------------------------------------------------------------------===//

#include "kernels/Copy.h"
#include "kernels/cuda/DeviceInfo.h"
#include "tests/unit/kernels/CudaPairs.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <random>
#include <vector>

using namespace sharc;
using namespace sharc::kernels;
using sharc::kernels::test::DeviceBuffer;
using sharc::kernels::test::requireRan;

namespace {

struct CopyShape {
  int64_t rows, rowBytes, srcPitch, dstPitch, srcOffset, dstOffset;
};

} // namespace

TEST_CASE("cuda copy2d matches the cpu for every word width", "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  // A fused projection's column slice (768 of 1536 bytes per row), its
  // insert back, 8- and 4-byte words, an odd row, a contiguous block, and
  // more words than the grid has threads.
  const CopyShape shapes[] = {
      {8192, 768, 1536, 768, 768, 0}, {1000, 768, 768, 1536, 0, 768},
      {37, 24, 40, 56, 8, 16},        {37, 12, 20, 28, 4, 8},
      {37, 13, 20, 28, 3, 1},         {64, 512, 512, 512, 0, 0},
      {70000, 96, 192, 96, 96, 0}};
  std::mt19937 rng(81);
  for (const CopyShape &s : shapes) {
    INFO("rows " << s.rows << ", row bytes " << s.rowBytes << ", pitches "
                 << s.srcPitch << "/" << s.dstPitch << ", offsets "
                 << s.srcOffset << "/" << s.dstOffset);
    int64_t srcBytes = s.srcOffset + s.rows * s.srcPitch;
    int64_t dstBytes = s.dstOffset + s.rows * s.dstPitch;
    std::vector<uint8_t> src(srcBytes), dst(dstBytes);
    for (uint8_t &byte : src)
      byte = static_cast<uint8_t>(rng());
    for (uint8_t &byte : dst)
      byte = static_cast<uint8_t>(rng());
    DeviceBuffer deviceSrc(srcBytes), deviceDst(dstBytes);
    deviceSrc.upload(src.data());
    deviceDst.upload(dst.data());
    auto args = [&](void *srcBase, void *dstBase) {
      return Copy2dArgs{.src = static_cast<uint8_t *>(srcBase) + s.srcOffset,
                        .dst = static_cast<uint8_t *>(dstBase) + s.dstOffset,
                        .rows = s.rows,
                        .rowBytes = s.rowBytes,
                        .srcPitch = s.srcPitch,
                        .dstPitch = s.dstPitch};
    };
    cpu::copy2d(args(src.data(), dst.data()));
    requireRan(cuda::copy2d(args(deviceSrc.data(), deviceDst.data()), nullptr));
    std::vector<uint8_t> actual(dstBytes);
    deviceDst.download(actual.data());
    REQUIRE(actual == dst);
  }
}
