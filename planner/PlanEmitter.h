//===- PlanEmitter.h - from a train-step module to a plan -------*- C++ -*-===//
// defines: EmitOptions, PlanSchedule, emitPlan
//
// The thin layer between the IR and the planner's algorithms: reads the
// train-step function in schedule order, gives every value a buffer
// (parameters, optimizer state and inputs in their own regions, results in
// the output region, parameter gradients in the gradient arena, everything
// else in the activation arena, both arenas by BufferAssignment), and turns
// each op into a plan instruction. A data-parallel bucket
// (all_reduce_coalesced) becomes one slab: its gradients are views into it
// that their producers write, and one all_reduce sums it in place.
#pragma once

#include "planner/CostModel.h"
#include "planner/ScheduleGraph.h"
#include "planner/Streams.h"
#include "planner/plan/Plan.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace sharc {

struct EmitOptions {
  std::string mode = "dense";
  int64_t alignment = 256; ///< bytes; cuBLASLt wants 256-byte pointers
  /// Run collectives on their own stream, started early and waited for
  /// late; off, everything runs on one stream in program order.
  bool asyncCollectives = true;
  /// With a machine, the order is ListSchedule.h's latency-hiding one,
  /// predicted with its figures; without, Schedule.h's deferral of weight
  /// gradients past the next collective.
  const Machine *scheduleMachine = nullptr;
};

/// The schedule behind a plan, for the cost model and the timeline:
/// instruction i of the plan is node order[i] of the graph.
struct PlanSchedule {
  ScheduleGraph graph;
  std::vector<int64_t> order;
  StreamAssignment streams;
};

/// Emits the plan of @train_step. Fails with a diagnostic on a program the
/// runtime could not execute (for example an in-place update of a value
/// that is not a parameter).
mlir::FailureOr<plan::Plan> emitPlan(mlir::ModuleOp module,
                                     const EmitOptions &options,
                                     PlanSchedule *schedule = nullptr);

} // namespace sharc
