//===- AttentionViews.h - an attention gradient's checked views -*- C++ -*-===//
// defines: lseMatches, attentionGradArgs
//
// attention_grad (AttentionOps.cpp) and attention_block_grad
// (RingAttentionOps.cpp) read the same operands and results in the same
// places: q, k, v, out, lse, dout as operands 0..5 and dq, dk, dv as results
// 0..2. Their binds check and view them here, once; each adds what its op
// has beside (the column views' pitches, the block's dlse).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/OpTable.h"
#include "kernels/Attention.h"

namespace sharc::exec {

/// `lse` is f32 with one value per query row and head ([B, H, S]).
Status lseMatches(const TensorRef &lse, const kernels::AttentionExtent &extent,
                  const char *role);

/// Checks out and dout (float, q's shape), lse, and dq, dk, dv (float, the
/// shapes of q, k, v), and returns the args over them with `extent`'s sizes.
Result<kernels::AttentionGradArgs>
attentionGradArgs(const OpCall &c, const kernels::AttentionExtent &extent);

} // namespace sharc::exec
