//===- StreamEngines.h - what a CUDA stream launches through ----*- C++ -*-===//
// defines: createGemmEngine, createAttentionEngine, streamPriorities
//
// The per-stream pieces a CudaRank puts in each LaunchContext: the GEMM
// engine (cuBLASLt with its own workspace), the attention engine (cuDNN's
// fused SDPA where built and chosen, else none: sharc's kernels), and the
// streams' CUDA priorities, each chosen once at set-up from the build and
// the environment (SHARC_ATTENTION, SHARC_CUDNN_DETERMINISTIC,
// SHARC_STREAM_PRIORITY).
//
//   auto gemm = createGemmEngine(plan::kGemmWorkspaceBytes);
//   auto attention = createAttentionEngine(stream); // may hold null
#pragma once

#include "executor/OpTable.h"

#include <cuda_runtime.h>

#include <memory>
#include <vector>

namespace sharc::exec {

Result<std::unique_ptr<GemmEngine>> createGemmEngine(int64_t workspaceBytes);

/// Null (sharc's own kernels) without cuDNN in the build or with
/// SHARC_ATTENTION=sharc.
Result<std::unique_ptr<AttentionEngine>>
createAttentionEngine(cudaStream_t stream);

/// Each plan stream's CUDA priority (SHARC_STREAM_PRIORITY).
Result<std::vector<int>> streamPriorities(int64_t numStreams);

} // namespace sharc::exec
