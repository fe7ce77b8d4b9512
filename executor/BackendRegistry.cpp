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

std::string resolveBackend(const std::string &name, int64_t localRanks) {
  if (name != "auto")
    return name;
#if SHARC_WITH_CUDA
  if (cudaDevicesVisible() >= localRanks)
    return "cuda";
#endif
  return "cpu";
}

int64_t gpusToShare(int64_t worldSize) {
#if SHARC_WITH_CUDA
  int64_t devices = cudaDevicesVisible();
  if (devices > 0 && devices < worldSize && cudaDevicesReachEachOther(devices))
    return devices;
#endif
  return 0;
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
  BackendOptions cudaOptions = options;
  if (cudaOptions.span.count == 0)
    cudaOptions.span = RankSpan{
        .first = 0, .count = plan.worldSize(), .world = plan.worldSize()};
  int64_t localIndex = options.processes ? options.processes->localIndex() : 0;
  // The GPUs of this node's processes before this one come first.
  int64_t needed = (localIndex + 1) * cudaOptions.span.count;
  int64_t devices = cudaDevicesVisible();
  if (devices >= needed || (options.shareGpus && devices > 0))
    return createCudaBackend(plan, cudaOptions);
  if (name == "auto")
    return createCpuBackend(plan, options);
  if (cudaOptions.span.count != plan.worldSize())
    return Status::invalidInput(
        "this process drives ranks " + std::to_string(cudaOptions.span.first) +
        ".." +
        std::to_string(cudaOptions.span.first + cudaOptions.span.count - 1) +
        " on GPUs from " + std::to_string(localIndex * cudaOptions.span.count) +
        " on, but this node has " + std::to_string(devices) + " CUDA devices");
  return Status::invalidInput(
      "the plan has " + std::to_string(plan.worldSize()) +
      " ranks but this node has " + std::to_string(devices) +
      " CUDA devices (--share-gpus runs several ranks on one GPU)");
#else
  if (name == "auto")
    return createCpuBackend(plan, options);
  return Status::invalidInput(
      "this sharc-run was built without CUDA; backends: cpu");
#endif
}

} // namespace sharc::exec
