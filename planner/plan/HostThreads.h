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
/// zero or old bytes). Memory the process has not touched costs a page
/// fault per page on its first write (1.1-1.4 GB/s on one thread on the
/// GPU node, a tenth of a copy's speed), so a vector that must grow past a
/// few MiB is first touched on several threads; one already large enough
/// keeps its pages.
template <typename Byte>
void resizeForOverwrite(std::vector<Byte> &bytes, size_t size) {
  static_assert(sizeof(Byte) == 1, "a vector of bytes");
  constexpr size_t kParallelBytes = size_t{8} << 20;
  if (size <= bytes.capacity() || size < kParallelBytes) {
    bytes.resize(size);
    return;
  }
  // The new storage's pages are written first on several threads; the
  // resize's own zeroing then runs over touched pages at memset speed.
  std::vector<Byte> grown;
  grown.reserve(size);
  int64_t threads =
      std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 16);
  size_t share =
      (size + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  runShares(threads, [&](int64_t t) {
    size_t begin = static_cast<size_t>(t) * share;
    if (begin < size)
      std::memset(grown.data() + begin, 0, std::min(share, size - begin));
  });
  grown.resize(size);
  bytes = std::move(grown);
}

} // namespace sharc
