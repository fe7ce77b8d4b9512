//===- BackendRegistry.cpp - backends by name -----------------------------===//
//
// The one place that asks whether CUDA was built (SHARC_WITH_CUDA).
//
//===----------------------------------------------------------------------===//

#include "executor/Backend.h"
#include "executor/CpuBackend.h"

#if SHARC_WITH_CUDA
#include "executor/cuda/CudaBackend.h"
#endif

namespace sharc::exec {

std::string resolveBackend(const std::string &name, int64_t worldSize) {
  if (name != "auto")
    return name;
#if SHARC_WITH_CUDA
  if (cudaDevicesVisible() >= worldSize)
    return "cuda";
#endif
  return "cpu";
}

int64_t deviceFreeBytes(const std::string &name, int64_t worldSize) {
#if SHARC_WITH_CUDA
  if (name == "cuda")
    return cudaLeastFreeBytes(worldSize);
#endif
  return -1;
}

Result<std::unique_ptr<Backend>> createBackend(const std::string &name,
                                               const plan::Plan &plan,
                                               const BackendOptions &options) {
  if (name == "cpu")
    return createCpuBackend(plan, options);
  if (name != "cuda" && name != "auto")
    return Status::invalidInput("unknown backend '" + name +
                                "' (cpu, cuda or auto)");
#if SHARC_WITH_CUDA
  int64_t devices = cudaDevicesVisible();
  if (devices >= plan.worldSize())
    return createCudaBackend(plan, options);
  if (name == "auto")
    return createCpuBackend(plan, options);
  return Status::invalidInput(
      "the plan has " + std::to_string(plan.worldSize()) +
      " ranks but this node has " + std::to_string(devices) + " CUDA devices");
#else
  if (name == "auto")
    return createCpuBackend(plan, options);
  return Status::invalidInput(
      "this sharc-run was built without CUDA; backends: cpu");
#endif
}

} // namespace sharc::exec
