//===- KernelsCudaCopyTest.cpp - cuda copy2d against the cpu --------------===//
//
// cuda::copy2d against cpu::copy2d on random bytes, for every word width
// its kernel picks (16, 8, 4 bytes; odd sizes fall back to
// cudaMemcpy2DAsync) and the contiguous case: every destination byte,
// including the pitch gaps that must stay untouched, equals the cpu's; and
// cuda::permuteBlocks against cpu::permuteBlocks.
// Exits 77 (ctest's skip code) on a machine without a device.
//
//===----------------------------------------------------------------------===//

#include "kernels/Copy.h"
#include "kernels/cuda/DeviceInfo.h"
#include "tests/unit/kernels/CudaPairs.h"

#include <catch2/catch.hpp>

#include <algorithm>
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

TEST_CASE("cuda permuteBlocks matches the cpu", "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  // The balanced split's orders over 2 and 4 ranks (natural from rank
  // order), on blocks of odd and of aligned sizes.
  const std::vector<std::vector<int64_t>> orders = {{0, 2, 3, 1},
                                                    {0, 2, 4, 6, 7, 5, 3, 1}};
  std::mt19937 rng(83);
  for (const std::vector<int64_t> &order : orders)
    for (int64_t blockBytes : {int64_t{13}, int64_t{4096}}) {
      INFO(order.size() << " blocks of " << blockBytes << " bytes");
      auto numBytes = static_cast<int64_t>(order.size()) * blockBytes;
      std::vector<uint8_t> src(numBytes), dst(numBytes, 0);
      for (uint8_t &byte : src)
        byte = static_cast<uint8_t>(rng());
      DeviceBuffer deviceSrc(numBytes), deviceDst(numBytes);
      deviceSrc.upload(src.data());
      cpu::permuteBlocks({.src = src.data(),
                          .dst = dst.data(),
                          .blockBytes = blockBytes,
                          .order = order});
      requireRan(cuda::permuteBlocks({.src = deviceSrc.data(),
                                      .dst = deviceDst.data(),
                                      .blockBytes = blockBytes,
                                      .order = order},
                                     nullptr));
      std::vector<uint8_t> actual(numBytes);
      deviceDst.download(actual.data());
      REQUIRE(actual == dst);
      // Block 1 of the result is block order[1] of the source.
      REQUIRE(std::equal(actual.begin() + blockBytes,
                         actual.begin() + 2 * blockBytes,
                         src.begin() + order[1] * blockBytes));
    }
}
