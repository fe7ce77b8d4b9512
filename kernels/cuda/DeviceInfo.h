//===- DeviceInfo.h - CUDA device query and toolchain check -----*- C++ -*-===//
// defines: deviceCount, addOnDevice (cuda::)
//
// The smallest CUDA code sharc builds: it proves that nvcc, the runtime and
// the driver work together before the real kernels arrive. Neither function
// aborts; without a driver or a device deviceCount() is 0.
#pragma once

#include "planner/plan/Status.h"

#include <cstdint>

namespace sharc::kernels::cuda {

/// Number of visible CUDA devices; 0 when the driver or a device is missing.
int deviceCount();

/// y = a + b on device 0 through device buffers; a, b and y are host arrays
/// of numel floats. Fails with a Status naming the CUDA call that failed.
Status addOnDevice(const float *a, const float *b, float *y, int64_t numel);

} // namespace sharc::kernels::cuda
