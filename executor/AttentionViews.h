//===- AttentionViews.h - an attention gradient's checked views -*- C++ -*-===//
// defines: lseMatches, attentionGradArgs, launchAttention
//
// attention_grad (AttentionOps.cpp) and attention_block_grad
// (RingAttentionOps.cpp) read the same operands and results in the same
// places: q, k, v, out, lse, dout as operands 0..5 and dq, dk, dv as results
// 0..2. Their binds check and view them here, once; each adds what its op
// has beside (the column views' pitches, the block's dlse). All four
// launch through launchAttention, which prefers the stream's library.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/OpTable.h"
#include "kernels/Attention.h"

#include <optional>
#include <type_traits>

namespace sharc::exec {

/// `lse` is f32 with one value per query row and head ([B, H, S]).
Status lseMatches(const TensorRef &lse, const kernels::AttentionExtent &extent,
                  const char *role);

/// Checks out and dout (float, q's shape), lse, and dq, dk, dv (float, the
/// shapes of q, k, v), and returns the args over them with `extent`'s sizes.
Result<kernels::AttentionGradArgs>
attentionGradArgs(const OpCall &c, const kernels::AttentionExtent &extent);

/// The stream's attention engine when it prepares this shape, else the
/// backend's own kernel. A shape the library refuses runs on sharc's
/// kernel, saying so on stderr at set-up, so a run never fails for want of
/// the faster path. The engine works in the plan's workspace buffer when
/// the instruction has one of the size it asks (the planner places it in
/// the activation arena for the instruction alone), else in the stream's
/// scratch.
template <typename Args>
Result<Launch> launchAttention(
    const OpCall &c, const OpEnv &env, const Args &args,
    const TensorRef *workspace,
    std::type_identity_t<void (*)(const Args &)> cpuKernel,
    std::type_identity_t<Status (*)(const Args &, kernels::DeviceStream)>
        cudaKernel) {
  AttentionEngine *engine = streamAttention(c, env);
  if (!engine || !engine->accepts(args.q.dtype, args.headDim))
    return launchKernel(env, args, cpuKernel, cudaKernel);
  std::optional<int64_t> need = prepareOnLibrary(c, *engine, args);
  if (!need)
    return launchKernel(env, args, cpuKernel, cudaKernel);
  if (workspace && workspace->buffer->numBytes >= *need) {
    void *planned = workspace->data;
    return Launch([args, planned](const LaunchContext &context) {
      if (!context.attention)
        return Status::runtimeError("the stream has no attention engine");
      return context.attention->run(args, planned);
    });
  }
  return libraryLaunchOnScratch(c, env, args, *need);
}

} // namespace sharc::exec
