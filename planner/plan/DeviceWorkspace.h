//===- DeviceWorkspace.h - what a GPU rank holds beside the plan *- C++ -*-===//
// defines: kGemmWorkspaceBytes, DeviceWorkspace, predictDeviceWorkspace,
//          AttentionGradShape, cudnnAttentionGradBytes,
//          kCudnnPrefillWorkspaceBytes,
//          collectiveStagingBytes, runsGemm,
//          streamRunsGemm
//
// The plan's regions are all a rank's tensors; on the CUDA backend the
// libraries and kernels need working memory too, sized at set-up and never
// grown during a step. The compiler's report predicts it from the plan
// alone (the same rules the CUDA backend allocates by, written once here),
// and sharc-run prints the prediction beside what was allocated:
//  - cuBLASLt: kGemmWorkspaceBytes per stream that runs a GEMM (CudaBackend
//    gives each such stream a GEMM engine with that much; a communication
//    stream gets none);
//  - kernel scratch, per stream the largest need of its instructions:
//    rms_norm_grad's (and rms_norm_grad_add's) per-block dw rows (at most
//    512 blocks of group_size fp32), cross_entropy's per-token losses
//    (fp32), decode_attention's chunks (fp32 partial outputs), and cuDNN's
//    attention backward (fp32 accumulators of dq and, under GQA, of dk and
//    dv per query head, and a row statistic, as cuDNN 9.19 states at
//    set-up: cudnnAttentionGradBytes; its deterministic
//    backward, asked for with SHARC_CUDNN_DETERMINISTIC=1, takes several
//    times more and is not predicted) unless the plan gives the
//    instruction a workspace of that size in its activation arena, as the
//    compiler does for every bf16 attention_grad;
//  - staging of gathers and scatters along an inner dimension (NCCL moves
//    contiguous blocks only), per stream the largest of its own.
// The CUDA context and NCCL's own buffers are the driver's and NCCL's, not
// predicted here; sharc-run's "device in use" line includes them.
#pragma once

#include "planner/plan/Plan.h"

#include <cstdint>
#include <vector>

namespace sharc::plan {

/// On cuda, what a rank holds beyond its plan once running: NCCL's buffers
/// (a communicator per stream and axis), cuBLASLt workspaces, kernels'
/// scratch. Measured on an H200: 3,159 MiB in use for a 1,502 MiB plan,
/// of which about 500 MiB is the CUDA context that cudaMemGetInfo's free
/// bytes already exclude (docs/benchmarks.md). `sharc-run --bench` adds it
/// to a plan before comparing with the memory a rank may use, and `sharc
/// bench --recompute auto` takes it off that memory before its search.
inline constexpr int64_t kCudaRankReserveBytes = int64_t{1152} << 20;
/// The CUDA context and the libraries' handles, which cudaMemGetInfo's free
/// bytes exclude but a GPU's total does not: sharc-run's "device in use"
/// was 547-625 MiB above the plan and its workspace on an H200 (MiniMind
/// to a 6.5B model); rounded up.
inline constexpr int64_t kCudaContextBytes = int64_t{768} << 20;

/// cuBLASLt's workspace per stream. Offered 32 MiB, the heuristic picks
/// kernels that ask for up to 18 MiB at MiniMind's seq-8192 shapes (4
/// bytes at seq 2048 and hidden 4096), yet on an H200 the steps took the
/// same time offered 0, 1, 4, 8 or 32 MiB (MiniMind seq 2048 batch 4 and 2,
/// seq 8192 batch 2, hidden 4096; docs/benchmarks.md, fourteenth session):
/// 1 MiB keeps the small asks and 31 MiB a stream free.
inline constexpr int64_t kGemmWorkspaceBytes = 1ll << 20;

struct DeviceWorkspace {
  int64_t gemmBytes = 0;
  int64_t scratchBytes = 0; ///< summed over streams
  int64_t stagingBytes = 0; ///< summed over streams
  int64_t totalBytes() const { return gemmBytes + scratchBytes + stagingBytes; }
};

/// Per rank (the plan's ranks are alike in size).
DeviceWorkspace predictDeviceWorkspace(const Plan &plan);

/// A bf16 attention backward as cudnnAttentionGradBytes reads it: q [S,
/// B, H*D] and k [Sk, B, Hkv*D]; with a position axis of `axisSize` ranks
/// the queries are a rank's block of the sequence (balanced or contiguous
/// split) and the keys all of it from position 0 (attention_grad), or, for
/// `ringBlock`, the block ring attention's step `kvShift` brings
/// (attention_block_grad without dlse).
struct AttentionGradShape {
  std::vector<int64_t> q, k;
  int64_t headDim = 0, axisSize = 1, kvShift = 0;
  bool balanced = false, ringBlock = false;
};

/// cuDNN's workspace for that backward on the rank that needs the most:
/// kernels/AttentionRuns.h's cudnnAttentionGradRunBytes over the rank's
/// calls (the staging of all but the last call's dk and dv and of packed
/// lse rows, then what cuDNN 9.19 asks for the largest call).
int64_t cudnnAttentionGradBytes(const AttentionGradShape &shape);

/// cuDNN's flash forward with a padding mask (decode_attention's prefill
/// path): 256 bytes for every shape KernelsCudaDecodeTest builds (cuDNN
/// 9.19, H100), beside the staging of decodePrefillStagingBytes.
inline constexpr int64_t kCudnnPrefillWorkspaceBytes = 256;

/// Bytes of staging `stream`'s inner-dimension all_gather, reduce_scatter
/// and all_to_all need: the largest gathered (or scattered) tensor whose
/// split dimension has a non-unit dimension before it, and an all_to_all's
/// packed input and output.
int64_t collectiveStagingBytes(const Plan &plan, int64_t stream);

/// Whether `instr` runs on cuBLASLt (the matmul family).
bool runsGemm(const Instruction &instr);

/// Whether any instruction of `stream` runs on cuBLASLt.
bool streamRunsGemm(const Plan &plan, int64_t stream);

} // namespace sharc::plan
