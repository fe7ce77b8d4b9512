//===- ParamDraw.cpp - the normal draw on the host
//-------------------------===//
//
// Implements kernels/ParamDraw.h's cpu::drawNormal. Compiled with
// -ffp-contract=off (kernels/CMakeLists.txt): the draw's products and sums
// must stay apart to give the device's bits.
//
//===----------------------------------------------------------------------===//

#include "kernels/ParamDraw.h"
#include "planner/plan/HostThreads.h"

#include <algorithm>
#include <thread>

namespace sharc::kernels::cpu {
namespace {

/// Draws under this many elements run on the calling thread.
constexpr int64_t kParallelElements = 1 << 20;

} // namespace

double drawNormalValue(double stddev, uint64_t key, int64_t index) {
  return kernels::drawNormal(stddev, key, index);
}

void drawNormal(const NormalDrawArgs &args) {
  auto drawRows = [&args](int64_t firstRow, int64_t endRow) {
    for (int64_t row = firstRow; row < endRow; ++row) {
      int64_t base = row * args.columns;
      int64_t global = args.rowStarts[row];
      for (int64_t c = 0; c < args.columns; ++c)
        storeElement(args.out, base + c,
                     kernels::drawNormal(args.stddev, args.key, global + c));
    }
  };
  // A 7B model's weights are billions of draws: rows go to several
  // threads, each value still a function of its global index alone.
  int64_t threads = std::min<int64_t>(
      std::max(1u, std::thread::hardware_concurrency()), args.rows);
  if (args.rows * args.columns < kParallelElements || threads <= 1) {
    drawRows(0, args.rows);
    return;
  }
  int64_t perThread = (args.rows + threads - 1) / threads;
  runShares((args.rows + perThread - 1) / perThread, [&](int64_t share) {
    int64_t first = share * perThread;
    drawRows(first, std::min(args.rows, first + perThread));
  });
}

} // namespace sharc::kernels::cpu
