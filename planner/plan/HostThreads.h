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

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace sharc {

/// madvise's advice to make a range's pages present and writable.
#ifdef MADV_POPULATE_WRITE
inline constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
inline constexpr int kPopulateWrite = 23; // Linux 5.14's value
#endif

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
/// few MiB has its pages made present first, by the kernel
/// (MADV_POPULATE_WRITE, faster than faulting them one by one) on several
/// threads; the resize's zeroing then runs over present pages. Where the
/// kernel lacks it (Linux before 5.14), the resize faults them as before.
/// A vector already large enough keeps its pages.
template <typename Byte>
void resizeForOverwrite(std::vector<Byte> &bytes, size_t size) {
  static_assert(sizeof(Byte) == 1, "a vector of bytes");
  constexpr size_t kParallelBytes = size_t{8} << 20;
  if (size <= bytes.capacity() || size < kParallelBytes) {
    bytes.resize(size);
    return;
  }
  std::vector<Byte> grown;
  grown.reserve(size);
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  int64_t threads =
      std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 16);
  size_t share =
      (size + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  auto base = reinterpret_cast<uintptr_t>(grown.data());
  runShares(threads, [&](int64_t t) {
    // Whole pages inside this share (madvise takes page-aligned ranges);
    // the bytes around them are faulted by the resize.
    uintptr_t begin = base + std::min(size, static_cast<size_t>(t) * share);
    uintptr_t end = base + std::min(size, static_cast<size_t>(t + 1) * share);
    begin = (begin + page - 1) / page * page;
    end = end / page * page;
    if (begin < end)
      (void)madvise(reinterpret_cast<void *>(begin), end - begin,
                    kPopulateWrite);
  });
  grown.resize(size);
  bytes = std::move(grown);
}

} // namespace sharc
