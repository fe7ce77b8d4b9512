//===- HostMemory.h - how much memory this host has available ---*- C++ -*-===//
// defines: memAvailableBytes
//
// The kernel's estimate of the memory a process can still take without
// swapping (MemAvailable in /proc/meminfo), which the benchmark's cpu
// points and sharc-run's background saves are sized against.
#pragma once

#include <cstdint>
#include <string>

namespace sharc {

/// MemAvailable of a meminfo file in bytes; -1 when the file cannot be
/// read or has no such line (kernels before 3.14, other systems).
int64_t memAvailableBytes(const std::string &meminfoPath = "/proc/meminfo");

} // namespace sharc
