//===- MemberReduce.h - a reduction over ranks' buffers ---------*- C++ -*-===//
// defines: kMaxReduceMembers, MemberReduceArgs, reduceMembers (cuda::)
//
// The reduction of the collectives of ranks that share a GPU
// (executor/cuda/PeerMemoryCommunicator.h): every member's input is
// device memory this GPU can read, and each member computes its own result
// from all of them. dst[r * dstPitch + c] = op over members m, in member
// order, of srcs[m][srcOffset + r * srcPitch + c], for rows x cols
// elements: an all_reduce is one row, a reduce_scatter's piece one row per
// outer index. Float types add in fp32 and store once, which is what the
// cpu's reduceRun (executor/Communicator.cpp) computes for f32 and bf16
// (a partial sum rounded to fp32 after every member), so the members'
// results are the same bits on every rank and as the cpu's.
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

#include <cstdint>

namespace sharc::kernels::cuda {

inline constexpr int kMaxReduceMembers = 16;

struct MemberReduceArgs {
  const void *srcs[kMaxReduceMembers] = {};
  int numMembers = 0;
  DType dtype = DType::F32;
  bool max = false; ///< else the sum
  int64_t rows = 1, cols = 0;
  int64_t srcOffset = 0, srcPitch = 0; ///< in elements
  void *dst = nullptr;
  int64_t dstPitch = 0; ///< in elements
};

Status reduceMembers(const MemberReduceArgs &args, DeviceStream stream);

} // namespace sharc::kernels::cuda
