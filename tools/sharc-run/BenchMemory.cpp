//===- BenchMemory.cpp - device free memory and host available memory -----===//
//
// The device side is the backend registry's (executor/Backend.h), the one
// place that knows whether CUDA was built.
//
//===----------------------------------------------------------------------===//

#include "tools/sharc-run/BenchMemory.h"

#include "executor/Backend.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace sharc::benchrun {
namespace {

/// MemAvailable of /proc/meminfo in bytes, -1 when unreadable.
int64_t hostAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = -1;
    if (fields >> key >> kib && key == "MemAvailable:")
      return kib * 1024;
  }
  return -1;
}

} // namespace

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
    int64_t available = hostAvailableBytes();
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
