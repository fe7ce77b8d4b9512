//===- BenchMemory.cpp - device free memory and host available memory -----===//
//
// The device side is the backend registry's (executor/Backend.h), the one
// place that knows whether CUDA was built.
//
//===----------------------------------------------------------------------===//

#include "tools/sharc-run/BenchMemory.h"

#include "executor/Backend.h"
#include "planner/plan/HostMemory.h"

#include <algorithm>

namespace sharc::benchrun {

bool cudaAvailableFor(int64_t worldSize) {
  return exec::resolveBackend("auto", worldSize) == "cuda";
}

MemoryBudget memoryBudget(const std::string &backend, int64_t worldSize,
                          int64_t limitMiB) {
  MemoryBudget budget;
  if (backend == "cuda") {
    budget.bytesPerRank = exec::deviceFreeBytes("cuda", worldSize);
    budget.source = "free on the GPU";
  } else {
    int64_t available = memAvailableBytes();
    if (available >= 0) {
      budget.bytesPerRank = available / std::max<int64_t>(worldSize, 1);
      budget.source =
          "host MemAvailable / " + std::to_string(worldSize) + " ranks";
    }
  }
  if (limitMiB > 0 &&
      (budget.bytesPerRank < 0 || (limitMiB << 20) < budget.bytesPerRank)) {
    budget.bytesPerRank = limitMiB << 20;
    budget.source = "--memory-limit-mib";
  }
  return budget;
}

} // namespace sharc::benchrun
