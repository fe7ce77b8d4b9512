//===- HostThreads.h - independent shares of host work on threads -*- C++
//-*-===//
// defines: runShares (cpu::)
//
// runShares(n, work) runs work(0) .. work(n - 1), each share on a thread of
// its own and share 0 on the calling thread. The shares must not wait for
// one another: a share whose thread the host cannot start (std::thread
// throws std::system_error when it is out of threads or memory) runs on the
// calling thread afterwards, so a short host is slower, never aborted (a
// thrown start with threads still joinable would end the process).
#pragma once

#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

namespace sharc::kernels::cpu {

template <typename Work> void runShares(int64_t count, const Work &work) {
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

} // namespace sharc::kernels::cpu
