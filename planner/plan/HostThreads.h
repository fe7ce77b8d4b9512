//===- HostThreads.h - shares of host work on threads ----------*- C++ -*-===//
// defines: runShares, resizeForOverwrite
//
// runShares(n, work) runs work(0) .. work(n - 1), each share on a thread of
// its own and share 0 on the calling thread. The shares must not wait for
// one another: a share whose thread the host cannot start (std::thread
// throws std::system_error when it is out of threads or memory) runs on the
// calling thread afterwards, so a short host is slower, never aborted (a
// thrown start with threads still joinable would end the process).
#pragma once

#include "planner/plan/ByteVector.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace sharc {

template <typename Work> void runShares(int64_t count, const Work &work) {
  if (count <= 0)
    return;
  // One share (a small kernel's usual case) allocates nothing.
  if (count == 1) {
    work(0);
    return;
  }
  std::vector<std::thread> workers;
  std::vector<int64_t> onCaller{0};
  for (int64_t share = 1; share < count; ++share) {
    try {
      workers.emplace_back(work, share);
    } catch (const std::system_error &) {
      onCaller.push_back(share);
    }
  }
  for (int64_t share : onCaller)
    work(share);
  for (std::thread &worker : workers)
    worker.join();
}

/// Makes `bytes` `size` long, to be overwritten whole (the contents are
/// zero or old bytes). A vector that grows past a few MiB into new storage
/// is resized without a write (ByteVector.h) and then zeroed on several
/// threads, which also takes the page faults of memory the process has not
/// touched in parallel (10 GiB on the GPU node's 16 threads: 0.47 s, where
/// std::vector's resize took 4.8-5.5 s and the kernel's
/// MADV_POPULATE_WRITE on 16 threads 1.6-1.8 s). A vector already large
/// enough keeps its pages and zeroes only what it grows by.
template <typename Byte>
void resizeForOverwrite(BytesOf<Byte> &bytes, size_t size) {
  static_assert(sizeof(Byte) == 1, "a vector of bytes");
  constexpr size_t kParallelBytes = size_t{8} << 20;
  size_t old = bytes.size();
  if (size <= bytes.capacity() || size < kParallelBytes) {
    bytes.resize(size);
    if (size > old)
      std::memset(bytes.data() + old, 0, size - old);
    return;
  }
  BytesOf<Byte> grown;
  grown.resize(size);
  int64_t threads =
      std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 16);
  size_t share =
      (size + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  runShares(threads, [&](int64_t t) {
    size_t begin = std::min(size, static_cast<size_t>(t) * share);
    size_t end = std::min(size, static_cast<size_t>(t + 1) * share);
    std::memset(grown.data() + begin, 0, end - begin);
  });
  bytes = std::move(grown);
}

} // namespace sharc
