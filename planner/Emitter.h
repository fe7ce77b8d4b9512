//===- Emitter.h - one plan emission, shared by its files -------*- C++ -*-===//
// defines: Emitter
//
// emitPlan (PlanEmitter.h) runs one Emitter over @train_step. Its phases
// share the tables they fill (the buffer of every value, the slabs, the
// views), so they are one class, written in three files by job:
// PlanEmitter.cpp collects the ops, runs the phases and writes the
// instructions; EmitterBuffers.cpp gives every value its buffer;
// EmitterSchedule.cpp orders the ops, puts them on streams and places the
// activation and gradient arenas. Only those files include this header.
#pragma once

#include "ir/SharcOps.h"
#include "planner/PlanEmitter.h"
#include "planner/plan/Plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace sharc {

class Emitter {
public:
  Emitter(mlir::func::FuncOp func, const EmitOptions &options)
      : func(func), options(options) {}
  mlir::FailureOr<plan::Plan> emit();

private:
  mlir::FailureOr<int64_t> addBuffer(mlir::Value value, plan::Region region,
                                     std::string name);
  mlir::LogicalResult collectOps();
  mlir::LogicalResult assignArguments();
  mlir::LogicalResult createSlabs();
  mlir::LogicalResult assignResults();
  mlir::LogicalResult createActivationBuffers();
  mlir::LogicalResult createWorkspaces();
  mlir::LogicalResult createFusedWeight(ConcatOp concat);
  mlir::LogicalResult addGatheredRows(mlir::Value piece, ConcatOp concat);
  void createSplitViews();
  /// A column view of `base` for `piece`, `column` columns in.
  int64_t addColumnView(mlir::Value piece, int64_t base, int64_t column);
  mlir::LogicalResult createColumnViews();
  mlir::LogicalResult planSchedule();
  void emitInstructions();

  mlir::func::FuncOp func;
  const EmitOptions &options;
  plan::Plan result;
  llvm::DenseMap<mlir::Value, int64_t> bufferOf;
  llvm::SmallVector<mlir::Operation *> ops; ///< program order
  std::vector<int64_t> activationIds;
  std::map<plan::Region, int64_t> regionEnd;
  /// Pipeline stages: each (region, stage)'s end, and the end of the
  /// buffers every stage holds, which no stage's may overlap.
  std::map<std::pair<plan::Region, int64_t>, int64_t> stageEnd;
  std::map<plan::Region, int64_t> sharedEnd;
  /// Ops that work in a planned workspace (a bf16 attention_grad's cuDNN
  /// scratch) -> its activation buffer, a result of the instruction only.
  llvm::DenseMap<mlir::Operation *, int64_t> workspaceOf;
  /// In-place buckets: the coalesced op -> its slab buffer.
  llvm::DenseMap<mlir::Operation *, int64_t> slabOf;
  /// Per view, its slab and its offset from the slab's start.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> views;
  llvm::DenseSet<mlir::Value> slabOutputs; ///< step outputs that are views
  llvm::DenseSet<int64_t> arenaSlabs;      ///< slabs in the gradient arena
  /// Fused weights (sharc-fuse-projections): the parameters they join.
  llvm::DenseMap<mlir::Value, ConcatOp> fusedWeightOf;
  /// Fused weights gathered whole (ZeRO-3, sharc-shard-parameters): each
  /// gathered member -> the concat whose buffer's rows it writes.
  llvm::DenseMap<mlir::Value, ConcatOp> gatheredWeightOf;
  /// Values split into views whose pieces are step outputs: the output
  /// region holds them, and the outputs table gets the views afterwards.
  llvm::DenseSet<mlir::Value> outputBases;
  std::vector<std::pair<size_t, mlir::Value>> viewOutputs;
  /// Last-dimension splits and concats made column views
  /// (planner/ColumnViews.h): the splits, and each concat's pieces.
  llvm::SmallVector<SplitOp> columnSplits;
  llvm::DenseMap<mlir::Value, ConcatOp> columnConcatOf;
  MeshAttr mesh;
  /// The module's sharc.balanced_axis ("" when the sequence splits are
  /// contiguous).
  llvm::StringRef balancedAxis;

public:
  PlanSchedule schedule;
};

} // namespace sharc
