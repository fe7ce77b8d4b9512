//===- CollectiveLayoutTest.cpp - the GPU communicators' byte layouts -----===//
//
// executor/CollectiveLayout.h is what NCCL's all_to_all packs and unpacks
// by and what ranks sharing GPUs copy by; neither runs without a GPU. Here
// its copies run through the cpu's copy2d as an all_to_all would use them
// (each member's piece of every input, packed, placed as that member's
// block) and the outputs must equal the cpu backend's LocalCommunicator,
// byte for byte, for every split and concat pair.
//
//===----------------------------------------------------------------------===//

#include "executor/CollectiveLayout.h"
#include "executor/Communicator.h"

#include <catch2/catch.hpp>

#include <cstddef>
#include <numeric>
#include <thread>

using namespace sharc;
using namespace sharc::exec;

namespace {

using Bytes = std::vector<std::vector<std::byte>>;

/// Every member's input: distinct bytes per member and position.
Bytes inputs(int64_t members, int64_t numBytes) {
  Bytes in(static_cast<size_t>(members));
  for (int64_t m = 0; m < members; ++m)
    for (int64_t i = 0; i < numBytes; ++i)
      in[m].push_back(
          static_cast<std::byte>((i * 7 + m * 61 + i / 251) & 0xff));
  return in;
}

Bytes byCpuCommunicator(const Bytes &in, const std::vector<int64_t> &shape,
                        int64_t split, int64_t concat) {
  auto members = static_cast<int64_t>(in.size());
  CommWorld world({{"cp", members}});
  Bytes out(in.size(), std::vector<std::byte>(in[0].size()));
  std::vector<Status> statuses(in.size());
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < members; ++r)
    threads.emplace_back([&, r] {
      LocalCommunicator comm = world.communicator(r);
      statuses[r] = comm.allToAll(in[r].data(), out[r].data(), DType::BF16,
                                  shape, split, concat, "cp");
    });
  for (auto &thread : threads)
    thread.join();
  for (const Status &status : statuses)
    REQUIRE(status.message() == "");
  return out;
}

Bytes byLayout(const Bytes &in, const AllToAllLayout &layout) {
  Bytes out(in.size(), std::vector<std::byte>(in[0].size()));
  std::vector<std::byte> packed(static_cast<size_t>(layout.pieceBytes));
  for (int64_t r = 0; r < layout.members; ++r)
    for (int64_t m = 0; m < layout.members; ++m) {
      const void *piece = in[m].data() + r * layout.pieceBytes;
      if (layout.piecesStrided()) {
        kernels::cpu::copy2d(layout.packPiece(in[m].data(), r, packed.data()));
        piece = packed.data();
      }
      kernels::cpu::copy2d(layout.placeBlock(piece, m, out[r].data()));
    }
  return out;
}

} // namespace

TEST_CASE("all_to_all's layout moves the bytes the cpu communicator does") {
  const std::vector<int64_t> shape{8, 4, 6, 12};
  for (int64_t members : {2, 4})
    for (int64_t split = 0; split < 4; ++split)
      for (int64_t concat = 0; concat < 4; ++concat) {
        if (split == concat || shape[split] % members != 0)
          continue;
        INFO(members << " members, split " << split << " concat " << concat);
        auto layout = allToAllLayout(shape, split, concat, members, 2, "cp");
        REQUIRE(layout.status().message() == "");
        CHECK(layout->piecesStrided() == (split > 0));
        CHECK(layout->blocksStrided() == (concat > 0));
        Bytes in = inputs(members, layout->sendBytes);
        CHECK(byLayout(in, *layout) ==
              byCpuCommunicator(in, shape, split, concat));
      }
}

TEST_CASE("all_to_all's layout names the axis and sizes it refuses") {
  auto uneven = allToAllLayout({6, 4}, 0, 1, 4, 2, "cp");
  REQUIRE_FALSE(uneven);
  CHECK(uneven.status().message() ==
        "all_to_all over cp: dims 0 and 1 of a rank-2 input do not split "
        "over 4 ranks");
  CHECK_FALSE(allToAllLayout({8, 4}, 1, 1, 2, 2, "cp"));
  CHECK_FALSE(allToAllLayout({8, 4}, 0, 2, 2, 2, "cp"));
}

TEST_CASE("splitAt cuts a shape around a dimension") {
  DimSplit split = splitAt({3, 5, 7}, 1, 2);
  CHECK(split.outer == 3);
  CHECK(split.extent == 5);
  CHECK(split.innerBytes == 14);
  DimSplit first = splitAt({3, 5, 7}, 0, 4);
  CHECK(first.outer == 1);
  CHECK(first.innerBytes == 140);
}
