//===- ColumnViews.h - column splits and joins as views ---------*- C++ -*-===//
// defines: isColumnViewSplit, isColumnViewConcat
//
// The fused q/k/v projection (sharc-fuse-projections, the default) splits
// its GEMM's output by columns into q, k and v, and joins dq, dk and dv by
// columns for its backward GEMMs. Where every reader of a piece reads it in
// place (its kernel takes a row stride), and every piece joined is written in
// place, the planner makes the pieces column views of the whole (plan::Buffer::
// rowStride) and emits no copy; otherwise each piece is a column copy
// (PlanRecords.h, columnCopies). The slots that take row strides are
// planner/plan/ColumnSlots.h's, the list the runtime's op table also reads
// (it refuses a view anywhere else).
#pragma once

#include "ir/SharcOps.h"

namespace sharc {

/// A split along the last dimension whose pieces every reader reads in
/// place, none of them a step output.
bool isColumnViewSplit(SplitOp split);
/// A concat along the last dimension whose every operand is an op's result
/// written in place and read by nothing else, its own result no step
/// output.
bool isColumnViewConcat(ConcatOp concat);

} // namespace sharc
