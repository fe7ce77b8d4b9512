//===- ScheduleBuilder.h - schedule records of a train step -----*- C++ -*-===//
// defines: buildScheduleGraph
//
// The thin layer between the IR and the planner's record algorithms: one
// ScheduleNode per op of @train_step, in program order, with its data
// dependencies, the buffers it touches and its cost.
#pragma once

#include "ir/SharcAttrs.h"
#include "planner/ScheduleGraph.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"

namespace sharc {

/// `bufferOf` maps every value to its plan buffer id; `axisSizes` gives the
/// ranks on "dp" and "tp".
ScheduleGraph
buildScheduleGraph(llvm::ArrayRef<mlir::Operation *> ops,
                   const llvm::DenseMap<mlir::Value, int64_t> &bufferOf,
                   MeshAttr mesh);

} // namespace sharc
