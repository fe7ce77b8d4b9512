//===- KernelThreads.h - the threads a cpu kernel may use -------*- C++ -*-===//
// defines: setKernelThreads, kernelThreads, shareCount (kernels::cpu::)
//
// The cpu backend runs each rank on a thread of its own; a rank's large
// kernels (the GEMMs, AdamW) may cut their work into shares on more
// threads, as many as the cores the process has over its ranks
// (CpuBackend.cpp sets it). Each share computes whole elements, each
// element as one thread would, so the bits never depend on the count.
//
//   int64_t shares = shareCount(rows * cols * k, int64_t{1} << 23);
//   runShares(shares, [&](int64_t share) { ... });
#pragma once

#include <cstdint>

namespace sharc::kernels::cpu {

/// The threads one kernel call may use (at least 1; 1 until set).
void setKernelThreads(int64_t threads);
int64_t kernelThreads();

/// How many shares `work` (in any unit) is worth, at least `perShare` of
/// it each (starting a thread costs tens of microseconds), at most
/// kernelThreads() and at least 1.
int64_t shareCount(int64_t work, int64_t perShare);

} // namespace sharc::kernels::cpu
