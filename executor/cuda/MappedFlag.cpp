//===- MappedFlag.cpp - a word kernels set and the host reads -------------===//

#include "executor/cuda/MappedFlag.h"

#include "kernels/cuda/Launch.h"

#include <cuda_runtime.h>

namespace sharc::exec {

MappedFlag::~MappedFlag() {
  if (host_)
    (void)cudaFreeHost(const_cast<unsigned *>(host_));
}

Status MappedFlag::allocate() {
  void *word = nullptr;
  SHARC_CUDA(cudaHostAlloc(&word, sizeof(unsigned), cudaHostAllocMapped));
  host_ = static_cast<volatile unsigned *>(word);
  *host_ = 0;
  void *onDevice = nullptr;
  SHARC_CUDA(cudaHostGetDevicePointer(&onDevice, word, 0));
  device_ = static_cast<unsigned *>(onDevice);
  return Status::ok();
}

bool MappedFlag::take() {
  bool set = *host_ != 0;
  *host_ = 0;
  return set;
}

} // namespace sharc::exec
