//===- HostDevice.h - code for both the host and the device ----*- C++ -*-===//
// defines: SHARC_HOST_DEVICE
//
// Marks a function that both the cpu kernels and the CUDA kernels call (an
// index map, a position rule), so the two backends share one definition:
// __host__ __device__ under nvcc, nothing for the host compiler.
#pragma once

#ifdef __CUDACC__
#define SHARC_HOST_DEVICE __host__ __device__
#else
#define SHARC_HOST_DEVICE
#endif
