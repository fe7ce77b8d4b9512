//===- BufferAssignment.cpp - offsets of buffers in one arena -------------===//
//
// Placing one buffer looks only at the placed buffers whose lifetimes overlap
// its own: their byte ranges, merged, leave gaps below the current peak, and
// the buffer takes the smallest gap that fits (the least waste), the lowest
// of equal gaps. With no fitting gap it goes right above the highest of them,
// which is where the heap grows. The placed buffers are kept in offset
// order as they are placed, so a placement is one pass over them with no
// sort: O(n^2) in all with a small constant (sorting each placement's
// neighbours was O(n^2 log n) and a quarter of compiling 400 layers).
//
//===----------------------------------------------------------------------===//

#include "planner/BufferAssignment.h"

#include <algorithm>
#include <cassert>
#include <numeric>
#include <utility>

namespace sharc {
namespace {

struct Placed {
  int64_t offset;
  int64_t numBytes;
  int64_t firstStep;
  int64_t lastStep;
};

/// The best-fit offset for numBytes live over [firstStep, lastStep], given
/// every placed buffer in offset order and the arena's current peak.
int64_t bestFitOffset(const std::vector<Placed> &byOffset, int64_t numBytes,
                      int64_t firstStep, int64_t lastStep, int64_t peakBytes) {
  int64_t bestOffset = -1;
  int64_t bestGap = 0;
  int64_t freeFrom = 0;
  auto consider = [&](int64_t gapEnd) {
    int64_t gap = gapEnd - freeFrom;
    if (gap >= numBytes && (bestOffset < 0 || gap < bestGap)) {
      bestOffset = freeFrom;
      bestGap = gap;
    }
  };
  for (const Placed &placed : byOffset) {
    if (placed.firstStep > lastStep || firstStep > placed.lastStep)
      continue; // not live at the same time: its bytes are free
    if (placed.offset > freeFrom)
      consider(placed.offset);
    freeFrom = std::max(freeFrom, placed.offset + placed.numBytes);
  }
  // Space between the highest live buffer and the peak is free too: using
  // it costs nothing, as in XLA's FindChunkCandidate.
  consider(peakBytes);
  return bestOffset >= 0 ? bestOffset : freeFrom;
}

int64_t computeMaxLiveBytes(const std::vector<BufferRequest> &requests,
                            const std::vector<int64_t> &sizes) {
  // (step, delta) events; at equal steps frees sort first because a buffer
  // ending at step s is gone from step s + 1 on.
  std::vector<std::pair<int64_t, int64_t>> events;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (sizes[i] == 0)
      continue;
    events.emplace_back(requests[i].firstStep, sizes[i]);
    events.emplace_back(requests[i].lastStep + 1, -sizes[i]);
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, maxLive = 0;
  for (const auto &[step, delta] : events) {
    live += delta;
    maxLive = std::max(maxLive, live);
  }
  return maxLive;
}

} // namespace

BufferAssignment assignBuffers(const std::vector<BufferRequest> &requests,
                               int64_t alignment) {
  alignment = std::max<int64_t>(alignment, 1);
  const size_t count = requests.size();
  std::vector<int64_t> sizes(count);
  for (size_t i = 0; i < count; ++i) {
    assert(requests[i].numBytes >= 0 && "buffer sizes are never negative");
    assert(requests[i].firstStep <= requests[i].lastStep &&
           "a buffer lives at least one step");
    sizes[i] = (std::max<int64_t>(requests[i].numBytes, 0) + alignment - 1) /
               alignment * alignment;
  }

  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const BufferRequest &x = requests[a], &y = requests[b];
    if (x.numBytes != y.numBytes)
      return x.numBytes > y.numBytes;
    if (x.firstStep != y.firstStep)
      return x.firstStep < y.firstStep;
    return x.id < y.id;
  });

  BufferAssignment result;
  result.offsets.assign(count, 0);
  std::vector<Placed> byOffset;
  for (size_t index : order) {
    if (sizes[index] == 0)
      continue;
    const BufferRequest &request = requests[index];
    int64_t offset = bestFitOffset(byOffset, sizes[index], request.firstStep,
                                   request.lastStep, result.peakBytes);
    result.offsets[index] = offset;
    result.peakBytes = std::max(result.peakBytes, offset + sizes[index]);
    auto at = std::upper_bound(byOffset.begin(), byOffset.end(), offset,
                               [](int64_t value, const Placed &placed) {
                                 return value < placed.offset;
                               });
    byOffset.insert(
        at, {offset, sizes[index], request.firstStep, request.lastStep});
  }
  result.maxLiveBytes = computeMaxLiveBytes(requests, sizes);
  return result;
}

SlabLayout layoutSlab(const std::vector<int64_t> &memberBytes,
                      int64_t alignment) {
  alignment = std::max<int64_t>(alignment, 1);
  SlabLayout layout;
  for (int64_t numBytes : memberBytes) {
    assert(numBytes >= 0 && "buffer sizes are never negative");
    layout.offsets.push_back(layout.numBytes);
    layout.numBytes += (std::max<int64_t>(numBytes, 0) + alignment - 1) /
                       alignment * alignment;
  }
  return layout;
}

} // namespace sharc
