//===- TransferOrder.h - do a plan's transfers pair in order? ---*- C++ -*-===//
// defines: checkTransfersPairInOrder
//
// The cpu backend matches a recv to the send of its tag, so pipeline stages
// may list their transfers in any order. NCCL has no tags: on one
// communicator (an axis and a stream here) the n-th recv from a peer gets
// the n-th send to it. GPipe and 1F1B plans chain each link's transfers in
// program order on both sides; the interleaved schedule does not (its
// steps reorder microbatches against program order), and on NCCL such a
// plan would pair the wrong tensors or hang. The cuda backend therefore
// asks, before it sets up a rank, that every link's sends and recvs list
// the same tags in the same order, and refuses the plan otherwise, naming
// the link and the first place they differ.
#pragma once

#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

namespace sharc::exec {

/// invalidInput naming the first link (axis, stream, from stage, to stage)
/// whose sends and recvs list different tags at one position.
Status checkTransfersPairInOrder(const plan::Plan &plan);

} // namespace sharc::exec
