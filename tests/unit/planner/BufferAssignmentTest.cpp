//===- BufferAssignmentTest.cpp - arena offsets drawn and fuzzed ----------===//
//
// Pictures: bytes grow upwards, schedule steps to the right; the numbers on
// the bottom edge are step boundaries (a buffer of steps 0-1 spans 0 to 2).

#include "planner/BufferAssignment.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <string>

using namespace sharc;

namespace {

struct Named {
  std::string name;
  BufferRequest request;
};

struct Layout {
  BufferAssignment result;
  std::map<std::string, int64_t> offsets;
  int64_t offsetOf(const std::string &name) const { return offsets.at(name); }
};

Layout assign(const std::vector<Named> &buffers, int64_t alignment) {
  std::vector<BufferRequest> requests;
  for (const Named &buffer : buffers)
    requests.push_back(buffer.request);
  Layout layout{assignBuffers(requests, alignment), {}};
  REQUIRE(layout.result.offsets.size() == buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i)
    layout.offsets[buffers[i].name] = layout.result.offsets[i];
  return layout;
}

int64_t roundUp(int64_t numBytes, int64_t alignment) {
  return (numBytes + alignment - 1) / alignment * alignment;
}

} // namespace

TEST_CASE("a buffer reuses the bytes of one that died", "[planner]") {
  //  96 +-------+---------------+   a: 32 B, steps 0-1;  b: 64 B, steps 0-5
  //     |   a   |       c       |   c: 32 B, steps 2-5, reuses a's bytes
  //  64 +-------+---------------+
  //     |           b           |
  //   0 +-------+---------------+
  //     0       2               6
  Layout layout = assign(
      {{"a", {0, 32, 0, 1}}, {"b", {1, 64, 0, 5}}, {"c", {2, 32, 2, 5}}}, 32);
  REQUIRE(layout.offsetOf("b") == 0);
  REQUIRE(layout.offsetOf("a") == 64);
  REQUIRE(layout.offsetOf("c") == 64);
  REQUIRE(layout.result.peakBytes == 96);
  REQUIRE(layout.result.maxLiveBytes == 96);
}

TEST_CASE("best fit takes the smallest gap that fits, not the lowest",
          "[planner]") {
  //  224 +-------+-----------------------+   L: 96 B, steps 0-1
  //      |               Q               |   M: 64 B, steps 0-5
  //  192 +-------+-------+-------+-------+   N: 32 B, steps 0-1
  //      |   N   |       |   Z   |       |   Q: 32 B, steps 0-5
  //  160 +-------+-------+-------+-------+   Z: 32 B, steps 3-4
  //      |               M               |
  //   96 +-------+-----------------------+   At steps 3-4 the free gaps are
  //      |   L   |                       |   [0, 96) and [160, 192): Z fits
  //    0 +-------+-----------------------+   both and takes the tight one.
  //      0       2       3       5       6
  Layout layout = assign({{"Z", {4, 32, 3, 4}},
                          {"Q", {3, 32, 0, 5}},
                          {"N", {2, 32, 0, 1}},
                          {"M", {1, 64, 0, 5}},
                          {"L", {0, 96, 0, 1}}},
                         32);
  REQUIRE(layout.offsetOf("L") == 0);
  REQUIRE(layout.offsetOf("M") == 96);
  REQUIRE(layout.offsetOf("N") == 160);
  REQUIRE(layout.offsetOf("Q") == 192);
  REQUIRE(layout.offsetOf("Z") == 160);
  REQUIRE(layout.result.peakBytes == 224);
  REQUIRE(layout.result.maxLiveBytes == 224);
}

TEST_CASE("sizes round up to the alignment and empty buffers take no space",
          "[planner]") {
  //  768 +-----------+-------+   a: 100 B, steps 0-2 (256 aligned)
  //      |     a     |   d   |   b: 300 B, steps 1-3 (512 aligned)
  //  512 +---+-------+---+---+   d:  10 B, steps 3-4 (256 aligned), in the
  //      |   |     b     |   |       free space under the peak that a left
  //    0 +---+-----------+---+   e:   0 B, steps 0-4, offset 0, no bytes
  //      0   1       3   4   5
  Layout layout = assign({{"a", {0, 100, 0, 2}},
                          {"b", {1, 300, 1, 3}},
                          {"e", {2, 0, 0, 4}},
                          {"d", {3, 10, 3, 4}}},
                         256);
  REQUIRE(layout.offsetOf("b") == 0);
  REQUIRE(layout.offsetOf("a") == 512);
  REQUIRE(layout.offsetOf("d") == 512);
  REQUIRE(layout.offsetOf("e") == 0);
  REQUIRE(layout.result.peakBytes == 768);
  REQUIRE(layout.result.maxLiveBytes == 768);
}

TEST_CASE("disjoint lifetimes share one slot, overlapping ones stack",
          "[planner]") {
  std::vector<BufferRequest> disjoint, together;
  for (int64_t i = 0; i < 5; ++i) {
    disjoint.push_back({i, 64 * (i + 1), i, i});
    together.push_back({i, 64 * (i + 1), 0, 4});
  }
  BufferAssignment reused = assignBuffers(disjoint, 64);
  REQUIRE(reused.offsets == std::vector<int64_t>{0, 0, 0, 0, 0});
  REQUIRE(reused.peakBytes == 320);
  // Largest first: 320 at 0, then 256, 192, 128, 64 stacked above it.
  BufferAssignment stacked = assignBuffers(together, 64);
  REQUIRE(stacked.offsets == std::vector<int64_t>{896, 768, 576, 320, 0});
  REQUIRE(stacked.peakBytes == 960);
  REQUIRE(stacked.maxLiveBytes == 960);
  REQUIRE(assignBuffers({}, 256).peakBytes == 0);
}

TEST_CASE("a slab lays its members side by side at aligned offsets",
          "[planner]") {
  //  160 +-------------+   a data-parallel bucket of four gradients, in
  //      |      d      |   operand order; each starts aligned, as it would
  //   96 +-------------+   in a buffer of its own (c is empty and takes no
  //      |      b      |   space, d starts where it would have)
  //   64 +-------------+
  //      |  a (48 B)   |
  //    0 +-------------+
  SlabLayout slab = layoutSlab({48, 32, 0, 64}, 32);
  REQUIRE(slab.offsets == std::vector<int64_t>{0, 64, 96, 96});
  REQUIRE(slab.numBytes == 160);
  REQUIRE(layoutSlab({}, 32).numBytes == 0);
  REQUIRE(layoutSlab({5, 7}, 0).offsets == std::vector<int64_t>{0, 5});
}

TEST_CASE("slabs sized as one slot take turns in as few slots as live at once",
          "[planner]") {
  // Four buckets in backward order; each lives from its first member's
  // producer to its last member's update, so only neighbours overlap. The
  // planner requests each as large as the largest, then a slab's member
  // is at its slab's offset plus its layoutSlab offset:
  //
  //  192 +-----+-----+-----+-----+-----+   A: 96 B, steps 0-3
  //      |     |  B (64)   |     D     |   B: 64 B, steps 2-5
  //   96 +-----+-----+-----+-----+-----+   C: 80 B, steps 4-7
  //      |    A      |    C      |     |   D: 96 B, steps 6-9
  //    0 +-----+-----+-----+-----+-----+
  //      0     2     4     6     8    10
  auto slabs = [](int64_t slotBytes) {
    auto size = [&](int64_t numBytes) {
      return slotBytes ? slotBytes : numBytes;
    };
    return std::vector<Named>{{"A", {0, size(96), 0, 3}},
                              {"B", {1, size(64), 2, 5}},
                              {"C", {2, size(80), 4, 7}},
                              {"D", {3, size(96), 6, 9}}};
  };
  Layout slots = assign(slabs(96), 16);
  REQUIRE(slots.offsetOf("A") == 0);
  REQUIRE(slots.offsetOf("B") == 96);
  REQUIRE(slots.offsetOf("C") == 0);
  REQUIRE(slots.offsetOf("D") == 96);
  REQUIRE(slots.result.peakBytes == 192);
  SlabLayout c = layoutSlab({48, 32}, 16); // C's two members
  REQUIRE(slots.offsetOf("C") + c.offsets[1] == 48);
  // With their own sizes the big ones go first, at 0, and C above D
  // leaves B no room but a third slot on top.
  Layout own = assign(slabs(0), 16);
  REQUIRE(own.offsetOf("D") == 0);
  REQUIRE(own.offsetOf("C") == 96);
  REQUIRE(own.offsetOf("B") == 176);
  REQUIRE(own.result.peakBytes == 240);
}

TEST_CASE("random programs never overlap live buffers", "[planner]") {
  for (uint32_t seed = 0; seed < 500; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 random(seed);
    auto uniform = [&](int64_t low, int64_t high) {
      return std::uniform_int_distribution<int64_t>(low, high)(random);
    };
    const int64_t alignments[] = {1, 8, 256};
    int64_t alignment = alignments[uniform(0, 2)];
    int64_t numSteps = uniform(1, 40);
    std::vector<BufferRequest> requests(uniform(0, 60));
    for (size_t i = 0; i < requests.size(); ++i) {
      int64_t first = uniform(0, numSteps - 1);
      int64_t last = std::min(numSteps - 1, first + uniform(0, 12));
      // Mostly small buffers, some empty, a few large ones.
      int64_t kind = uniform(0, 9);
      int64_t numBytes = kind == 0   ? 0
                         : kind == 1 ? uniform(1 << 14, 1 << 16)
                                     : uniform(1, 2000);
      requests[i] = {static_cast<int64_t>(i) * 3 + 1, numBytes, first, last};
    }
    BufferAssignment result = assignBuffers(requests, alignment);
    REQUIRE(result.offsets.size() == requests.size());

    int64_t highest = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      int64_t size = roundUp(requests[i].numBytes, alignment);
      int64_t offset = result.offsets[i];
      if (size == 0) {
        REQUIRE(offset == 0);
        continue;
      }
      REQUIRE(offset >= 0);
      REQUIRE(offset % alignment == 0);
      REQUIRE(offset + size <= result.peakBytes);
      highest = std::max(highest, offset + size);
      for (size_t j = 0; j < i; ++j) {
        int64_t otherSize = roundUp(requests[j].numBytes, alignment);
        bool liveTogether = requests[i].firstStep <= requests[j].lastStep &&
                            requests[j].firstStep <= requests[i].lastStep;
        if (!liveTogether || otherSize == 0)
          continue;
        int64_t otherOffset = result.offsets[j];
        INFO("buffers " << i << " and " << j);
        REQUIRE((offset + size <= otherOffset ||
                 otherOffset + otherSize <= offset));
      }
    }
    REQUIRE(result.peakBytes == highest);

    int64_t maxLive = 0;
    for (int64_t step = 0; step < numSteps; ++step) {
      int64_t live = 0;
      for (const BufferRequest &request : requests)
        if (request.firstStep <= step && step <= request.lastStep)
          live += roundUp(request.numBytes, alignment);
      maxLive = std::max(maxLive, live);
    }
    REQUIRE(result.maxLiveBytes == maxLive);
    REQUIRE(result.peakBytes >= result.maxLiveBytes);

    // The layout depends on the requests, not on the order they come in.
    std::vector<size_t> order(requests.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::shuffle(order.begin(), order.end(), random);
    std::vector<BufferRequest> shuffled;
    for (size_t index : order)
      shuffled.push_back(requests[index]);
    BufferAssignment again = assignBuffers(shuffled, alignment);
    for (size_t k = 0; k < order.size(); ++k)
      REQUIRE(again.offsets[k] == result.offsets[order[k]]);
  }
}
