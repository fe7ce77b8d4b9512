//===- BenchMemory.h - the memory a benchmark point may use -----*- C++ -*-===//
// defines: MemoryBudget, memoryBudget
//
// A point whose plan needs more than a rank can get is an `oom` row,
// decided before anything is allocated: on cuda against each rank's GPU's
// free bytes (cudaMemGetInfo, after the context exists), on the cpu
// against the host's MemAvailable (/proc/meminfo) shared by the simulated
// ranks, which all live in this process. A test or a user may cap it.
#pragma once

#include <cstdint>
#include <string>

namespace sharc::benchrun {

struct MemoryBudget {
  int64_t bytesPerRank = -1; ///< -1: unknown (no check)
  std::string source;        ///< what it was measured against, for messages
};

/// The memory one rank of a `worldSize`-rank plan may use on `backend`
/// ("cpu" or "cuda"); `limitMiB` > 0 caps it.
MemoryBudget memoryBudget(const std::string &backend, int64_t worldSize,
                          int64_t limitMiB);

/// True when this build has CUDA and the node a GPU for each of
/// `worldSize` ranks: what `--backend auto` will pick.
bool cudaAvailableFor(int64_t worldSize);

} // namespace sharc::benchrun
