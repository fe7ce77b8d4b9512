//===- KernelsCudaDrawTest.cpp - the device's parameter draw --------------===//
//
// cuda::drawNormal against cpu::drawNormal, bit for bit, in f32 and bf16:
// a column shard (each row's start a row of the full tensor apart), rows
// in no order at global indices past 2^32 (the counter's high words), a
// row shorter than a warp, and a 64-million-element tensor (a large
// embedding), whose two draws it also times. Exits 77 (ctest's skip code)
// on a machine without a device.
//
//===----------------------------------------------------------------------===//

#include "kernels/ParamDraw.h"
#include "kernels/cuda/DeviceInfo.h"
#include "tests/unit/kernels/CudaPairs.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace sharc;
using namespace sharc::kernels;
using sharc::kernels::test::DeviceBuffer;
using sharc::kernels::test::requireRan;

namespace {

struct DrawShape {
  const char *name;
  std::vector<int64_t> rowStarts;
  int64_t columns;
};

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

} // namespace

TEST_CASE("cuda drawNormal stores the cpu's bits", "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  std::vector<DrawShape> shapes;
  DrawShape columnShard{"columns 1031..2061 of [4099, 2062]", {}, 1031};
  for (int64_t r = 0; r < 4099; ++r)
    columnShard.rowStarts.push_back(r * 2062 + 1031);
  shapes.push_back(columnShard);
  DrawShape scattered{"rows in no order past 2^32", {}, 777};
  for (int64_t r = 0; r < 1500; ++r)
    scattered.rowStarts.push_back((int64_t(1) << 33) +
                                  static_cast<int64_t>(splitmix64(r) % 100000) *
                                      777);
  shapes.push_back(scattered);
  shapes.push_back({"one short row", {5}, 7});
  DrawShape large{"[16384, 4096]", {}, 4096};
  for (int64_t r = 0; r < 16384; ++r)
    large.rowStarts.push_back(r * 4096);
  shapes.push_back(large);

  for (const DrawShape &shape : shapes)
    for (DType dtype : test::kFloatTypes) {
      INFO(shape.name << ", " << dtypeName(dtype));
      int64_t rows = static_cast<int64_t>(shape.rowStarts.size());
      int64_t numel = rows * shape.columns;
      int64_t numBytes = numel * dtypeSize(dtype);
      std::vector<std::byte> host(numBytes), fromDevice(numBytes);
      DeviceBuffer device(numBytes);
      device.poison();
      auto args = [&](void *out) {
        return NormalDrawArgs{.out = {out, dtype},
                              .rowStarts = shape.rowStarts.data(),
                              .rows = rows,
                              .columns = shape.columns,
                              .key = 0x5eed0000ull + rows,
                              .stddev = 0.02};
      };
      auto start = std::chrono::steady_clock::now();
      cpu::drawNormal(args(host.data()));
      double hostSeconds = secondsSince(start);
      start = std::chrono::steady_clock::now();
      requireRan(cuda::drawNormal(args(device.data())));
      double deviceSeconds = secondsSince(start);
      device.download(fromDevice.data());
      if (numel > (1 << 20))
        WARN(numel << " elements drawn: host " << hostSeconds * 1e3
                   << " ms, device " << deviceSeconds * 1e3 << " ms");
      int64_t firstDiffering = -1;
      for (int64_t i = 0; i < numBytes && firstDiffering < 0; ++i)
        if (host[i] != fromDevice[i])
          firstDiffering = i / dtypeSize(dtype);
      INFO("first differing element " << firstDiffering);
      REQUIRE(firstDiffering == -1);
    }
}

TEST_CASE("cuda drawNormal refuses storage it cannot write", "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  int64_t start = 0;
  Status status = cuda::drawNormal({.out = {nullptr, DType::F64},
                                    .rowStarts = &start,
                                    .rows = 1,
                                    .columns = 4});
  REQUIRE(status.code() == Status::Code::InvalidInput);
  REQUIRE(status.message().find("f64") != std::string::npos);
}
