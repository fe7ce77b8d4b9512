//===- BenchMemory.cpp - device free memory and host available memory -----===//
//
// Built with SHARC_WITH_CUDA only when the CUDA backend is (CMake sets it on
// this file alone), like executor/BackendRegistry.cpp.
//
//===----------------------------------------------------------------------===//

#include "tools/sharc-run/BenchMemory.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#if SHARC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

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
#if SHARC_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return count >= worldSize;
#else
  (void)worldSize;
  return false;
#endif
}

MemoryBudget memoryBudget(const std::string &backend, int64_t worldSize,
                          int64_t limitMiB) {
  MemoryBudget budget;
  if (backend == "cuda") {
#if SHARC_WITH_CUDA
    int64_t least = -1;
    for (int device = 0; device < worldSize; ++device) {
      size_t freeBytes = 0, totalBytes = 0;
      if (cudaSetDevice(device) != cudaSuccess ||
          cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) {
        (void)cudaGetLastError();
        continue;
      }
      int64_t freeNow = static_cast<int64_t>(freeBytes);
      least = least < 0 ? freeNow : std::min(least, freeNow);
    }
    budget.bytesPerRank = least;
    budget.source = "free on the GPU";
#endif
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
