//===- CollectiveOps.cpp - collective instructions on a Communicator ------===//
//
// all_reduce (attrs axis, reduce = "sum" | "max"), all_gather and
// reduce_scatter (axis, dim), slice_to_rank (axis, dim: this rank's
// contiguous piece of a replicated tensor, no communication) and replicate
// (axis: a copy; Megatron's f). Operand 0 is
// the input, result 0 the output; shapes are local, so all_gather's output
// is the input with dim `dim` times the axis size.

#include "executor/CpuBackend.h"

#include "executor/ShardLayout.h"

#include <cstring>

namespace sharc::exec {

using namespace opcheck;

namespace {

Result<std::string> axisAttr(const OpCall &c) {
  std::string axis = c.instr->getString("axis");
  if (axis.empty())
    return Status::invalidInput("missing string attribute 'axis'");
  return axis;
}

/// Checks that `out` is `in` with dim `dim` scaled by num/den.
Status scaledShape(const OpCall &c, int64_t dim, int64_t num, int64_t den) {
  const TensorRef &in = c.operands[0], &out = c.results[0];
  SHARC_TRY(dtypeIs(out, in.dtype(), "out"));
  int64_t rank = static_cast<int64_t>(in.shape().size());
  if (dim < 0 || dim >= rank)
    return Status::invalidInput("dim " + std::to_string(dim) +
                                " out of range for a rank-" +
                                std::to_string(rank) + " input");
  std::vector<int64_t> expected = in.shape();
  if (expected[dim] * num % den != 0)
    return Status::invalidInput("dim " + std::to_string(dim) + " of extent " +
                                std::to_string(expected[dim]) +
                                " does not split over " + std::to_string(den) +
                                " ranks");
  expected[dim] = expected[dim] * num / den;
  if (out.shape() != expected)
    return Status::invalidInput("out has shape " + shapeText(out.shape()) +
                                ", expected " + shapeText(expected));
  return Status::ok();
}

Status runAllReduce(const OpCall &c, const OpEnv &env) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  std::string reduce = c.instr->getString("reduce", "sum");
  if (reduce != "sum" && reduce != "max")
    return Status::invalidInput("reduce must be \"sum\" or \"max\", got \"" +
                                reduce + "\"");
  const TensorRef &in = c.operands[0], &out = c.results[0];
  SHARC_TRY(dtypeIs(out, in.dtype(), "out"));
  SHARC_TRY(numelIs(out, in.numel(), "out"));
  if (env.validateOnly)
    return Status::ok();
  return env.comm->allReduce(in.data, out.data, in.dtype(), in.numel(),
                             reduce == "sum" ? ReduceOp::Sum : ReduceOp::Max,
                             *axis);
}

Status runAllGather(const OpCall &c, const OpEnv &env) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  int64_t dim = c.instr->getInt("dim", 0);
  SHARC_TRY(scaledShape(c, dim, env.axisSize(*axis), 1));
  if (env.validateOnly)
    return Status::ok();
  const TensorRef &in = c.operands[0];
  return env.comm->allGather(in.data, c.results[0].data, in.dtype(), in.shape(),
                             dim, *axis);
}

Status runReduceScatter(const OpCall &c, const OpEnv &env) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  int64_t dim = c.instr->getInt("dim", 0);
  SHARC_TRY(scaledShape(c, dim, 1, env.axisSize(*axis)));
  if (env.validateOnly)
    return Status::ok();
  const TensorRef &in = c.operands[0];
  return env.comm->reduceScatter(in.data, c.results[0].data, in.dtype(),
                                 in.shape(), dim, *axis);
}

Status runSliceToRank(const OpCall &c, const OpEnv &env) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  int64_t dim = c.instr->getInt("dim", 0);
  int64_t pieces = env.axisSize(*axis);
  SHARC_TRY(scaledShape(c, dim, 1, pieces));
  if (env.validateOnly)
    return Status::ok();
  const TensorRef &in = c.operands[0], &out = c.results[0];
  ShardSlice slice;
  slice.globalShape = in.shape();
  slice.localShape = out.shape();
  slice.start.assign(in.shape().size(), 0);
  slice.start[dim] = env.coord(*axis) * out.shape()[dim];
  copyGlobalToLocal(in.data, in.dtype(), slice, out.data, out.dtype());
  return Status::ok();
}

/// A data-parallel gradient bucket: one all_reduce per operand, issued
/// together (operand i is summed into result i).
Status runAllReduceCoalesced(const OpCall &c, const OpEnv &env) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  for (size_t i = 0; i < c.operands.size(); ++i) {
    const TensorRef &in = c.operands[i], &out = c.results[i];
    SHARC_TRY(dtypeIs(out, in.dtype(), "out"));
    SHARC_TRY(numelIs(out, in.numel(), "out"));
  }
  if (env.validateOnly)
    return Status::ok();
  for (size_t i = 0; i < c.operands.size(); ++i)
    SHARC_TRY(env.comm->allReduce(c.operands[i].data, c.results[i].data,
                                  c.operands[i].dtype(), c.operands[i].numel(),
                                  ReduceOp::Sum, *axis));
  return Status::ok();
}

/// Megatron's f: the identity forward (its transpose is an all_reduce).
Status runReplicate(const OpCall &c, const OpEnv &env) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  const TensorRef &in = c.operands[0], &out = c.results[0];
  SHARC_TRY(dtypeIs(out, in.dtype(), "out"));
  SHARC_TRY(numelIs(out, in.numel(), "out"));
  if (env.validateOnly || in.data == out.data)
    return Status::ok();
  std::memcpy(out.data, in.data,
              static_cast<size_t>(in.numel() * dtypeSize(in.dtype())));
  return Status::ok();
}

} // namespace

void addCollectiveOps(std::unordered_map<std::string, OpDef> &table) {
  table["all_reduce"] = {runAllReduce, 1, 1};
  table["all_reduce_coalesced"] = {runAllReduceCoalesced, OpDef::kVariadic,
                                   OpDef::kVariadic};
  table["all_gather"] = {runAllGather, 1, 1};
  table["reduce_scatter"] = {runReduceScatter, 1, 1};
  table["slice_to_rank"] = {runSliceToRank, 1, 1};
  table["replicate"] = {runReplicate, 1, 1};
}

} // namespace sharc::exec
