//===- KernelThreads.cpp - the threads a cpu kernel may use ---------------===//

#include "kernels/cpu/KernelThreads.h"

#include <algorithm>
#include <atomic>

namespace sharc::kernels::cpu {
namespace {

std::atomic<int64_t> threadsPerCall{1};

} // namespace

void setKernelThreads(int64_t threads) {
  threadsPerCall.store(std::max<int64_t>(1, threads),
                       std::memory_order_relaxed);
}

int64_t kernelThreads() {
  return threadsPerCall.load(std::memory_order_relaxed);
}

int64_t shareCount(int64_t work, int64_t perShare) {
  return std::clamp<int64_t>(work / std::max<int64_t>(1, perShare), 1,
                             kernelThreads());
}

} // namespace sharc::kernels::cpu
