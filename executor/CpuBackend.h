//===- CpuBackend.h - plan instructions on cpu kernels ----------*- C++ -*-===//
// defines: TensorRef, OpCall, OpEnv, OpFn, OpDef, CpuBackend
//
// Maps each op of docs/plan-ops.md to a kernels::cpu call, deriving the
// kernel's sizes (m/n/k, seq/batch/heads) from the buffers' local shapes and
// the instruction's attributes. The table is built once; the runtime looks
// every instruction up when it binds the plan, not per step. Each op
// function validates its operands first and returns before touching memory
// when OpEnv::validateOnly is set, which is how a plan's shape errors are
// reported at set-up instead of in the middle of a step.
#pragma once

#include "executor/Communicator.h"
#include "kernels/TensorView.h"
#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace sharc::exec {

/// A buffer bound to its storage on one rank.
struct TensorRef {
  const plan::Buffer *buffer = nullptr;
  void *data = nullptr;

  DType dtype() const { return buffer->dtype; }
  const std::vector<int64_t> &shape() const { return buffer->shape; }
  int64_t numel() const;
  kernels::TensorView view() const { return {data, buffer->dtype}; }
  kernels::ConstTensorView cview() const { return {data, buffer->dtype}; }
};

struct OpCall {
  const plan::Instruction *instr = nullptr;
  std::vector<TensorRef> operands;
  std::vector<TensorRef> results;
};

/// What an op may need besides its buffers.
struct OpEnv {
  const std::vector<plan::MeshAxis> *mesh = nullptr;
  std::vector<int64_t> coords; ///< this rank's mesh coordinates
  Communicator *comm = nullptr;
  int64_t step = 1; ///< 1-based optimizer step
  bool validateOnly = false;

  /// Coordinate along `axis`, 0 for an axis the mesh lacks.
  int64_t coord(const std::string &axis) const;
  /// Where this rank's contiguous block of `localExtent` elements starts
  /// along a dimension split over the axis named by the instruction's
  /// attribute `axisAttr` (vocab_axis, position_axis); 0 when absent.
  int64_t blockStart(const plan::Instruction &instr, const char *axisAttr,
                     int64_t localExtent) const;
  /// Size of `axis`, 1 for an axis the mesh lacks (as Plan::axisSize).
  int64_t axisSize(const std::string &axis) const;
};

using OpFn = Status (*)(const OpCall &call, const OpEnv &env);

struct OpDef {
  OpFn fn = nullptr;
  int numOperands = 0; ///< kVariadic: any number, equal to the results'
  int numResults = 0;
  /// Bit k set: operand k is updated in place (adamw's param, m and v), so
  /// the hazard check counts it as written.
  uint32_t updatedOperands = 0;
  static constexpr int kVariadic = -1;
};

class CpuBackend {
public:
  /// The table, built on first use.
  static const CpuBackend &get();
  /// Null for an op this backend does not know.
  const OpDef *find(const std::string &op) const;

private:
  CpuBackend();
  std::unordered_map<std::string, OpDef> table_;
};

/// Adds the collective ops (all_reduce, all_gather, reduce_scatter,
/// slice_to_rank, replicate) to a table; CollectiveOps.cpp.
void addCollectiveOps(std::unordered_map<std::string, OpDef> &table);
/// Adds vocab_max, target_logit, sum_exp, vocab_parallel_loss and its
/// grad; VocabParallelOps.cpp.
void addVocabParallelOps(std::unordered_map<std::string, OpDef> &table);

namespace opcheck {
// Shared by the op files (OpChecks.cpp): each returns invalidInput naming
// the operand.
Status dtypeIs(const TensorRef &ref, DType dtype, const char *role);
Status isFloat(const TensorRef &ref, const char *role);
Status rankIs(const TensorRef &ref, size_t rank, const char *role);
Status numelIs(const TensorRef &ref, int64_t numel, const char *role);
Status sameShape(const TensorRef &ref, const TensorRef &like, const char *role);
std::string shapeText(const std::vector<int64_t> &shape);
} // namespace opcheck

} // namespace sharc::exec
