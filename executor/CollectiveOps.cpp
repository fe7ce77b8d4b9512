//===- CollectiveOps.cpp - collective instructions on a Communicator ------===//
//
// all_reduce (attrs axis, reduce = "sum" | "max"), all_gather and
// reduce_scatter (axis, dim) and their buckets along dim 0
// (all_gather_coalesced, reduce_scatter_coalesced: axis), all_to_all (axis,
// split_dim, concat_dim: Ulysses's exchange), slice_to_rank (axis, dim: this
// rank's contiguous piece of a replicated tensor, no communication) and
// replicate (axis: a copy; Megatron's f); column_slice and column_insert
// (offset: strided copies of a fused projection's columns, no communication),
// permute_blocks (order: blocks of dim 0 reordered, a copy); send and recv
// (axis, peer, tag: a pipeline stage's transfer to or from another). Operand 0
// is the input, result 0 the output; shapes are local, so all_gather's output
// is the input with dim `dim` times the axis size.

#include "executor/OpTable.h"

#include "executor/ShardLayout.h"
#include "kernels/Copy.h"

#include <algorithm>
#include <cstddef>

namespace sharc::exec {

using namespace opcheck;

namespace {

Result<std::string> axisAttr(const OpCall &c) {
  std::string axis = c.instr->getString("axis");
  if (axis.empty())
    return Status::invalidInput("missing string attribute 'axis'");
  return axis;
}

/// Checks that result `k` is operand `k` with dim `dim` scaled by num/den.
Status scaledShape(const OpCall &c, int64_t dim, int64_t num, int64_t den,
                   size_t k = 0) {
  const TensorRef &in = c.operands[k], &out = c.results[k];
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

Result<Launch> bindAllReduce(const OpCall &c, const OpEnv &env) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  std::string reduce = c.instr->getString("reduce");
  if (reduce != "sum" && reduce != "max")
    return Status::invalidInput("reduce must be \"sum\" or \"max\", got \"" +
                                reduce + "\"");
  const TensorRef &in = c.operands[0], &out = c.results[0];
  SHARC_TRY(dtypeIs(out, in.dtype(), "out"));
  SHARC_TRY(numelIs(out, in.numel(), "out"));
  ReduceOp op = reduce == "sum" ? ReduceOp::Sum : ReduceOp::Max;
  // Over several axes at once ("dp,tp") without a group for them: one
  // reduction per axis, in place after the first, sums the same.
  std::vector<std::string> steps{*axis};
  if (axis->find(',') != std::string::npos) {
    steps.clear();
    for (size_t start = 0; start <= axis->size();) {
      size_t end = std::min(axis->find(',', start), axis->size());
      steps.push_back(axis->substr(start, end - start));
      start = end + 1;
    }
  }
  return Launch([in, out, op, axis = *axis,
                 steps](const LaunchContext &context) -> Status {
    if (context.comm->hasGroup(axis))
      return context.comm->allReduce(in.data, out.data, in.dtype(), in.numel(),
                                     op, axis);
    const void *source = in.data;
    for (const std::string &step : steps) {
      SHARC_TRY(context.comm->allReduce(source, out.data, in.dtype(),
                                        in.numel(), op, step));
      source = out.data;
    }
    return Status::ok();
  });
}

Result<Launch> bindAllGather(const OpCall &c, const OpEnv &env) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  int64_t dim = c.instr->getInt("dim");
  SHARC_TRY(scaledShape(c, dim, env.axisSize(*axis), 1));
  const TensorRef &in = c.operands[0], &out = c.results[0];
  return Launch([in, out, dim, axis = *axis](const LaunchContext &context) {
    return context.comm->allGather(in.data, out.data, in.dtype(), in.shape(),
                                   dim, axis);
  });
}

Result<Launch> bindReduceScatter(const OpCall &c, const OpEnv &env) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  int64_t dim = c.instr->getInt("dim");
  SHARC_TRY(scaledShape(c, dim, 1, env.axisSize(*axis)));
  const TensorRef &in = c.operands[0], &out = c.results[0];
  return Launch([in, out, dim, axis = *axis](const LaunchContext &context) {
    return context.comm->reduceScatter(in.data, out.data, in.dtype(),
                                       in.shape(), dim, axis);
  });
}

Result<Launch> bindAllToAll(const OpCall &c, const OpEnv &env) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  int64_t splitDim = c.instr->getInt("split_dim");
  int64_t concatDim = c.instr->getInt("concat_dim");
  int64_t size = env.axisSize(*axis);
  const TensorRef &in = c.operands[0], &out = c.results[0];
  SHARC_TRY(dtypeIs(out, in.dtype(), "out"));
  int64_t rank = static_cast<int64_t>(in.shape().size());
  if (splitDim < 0 || splitDim >= rank || concatDim < 0 || concatDim >= rank ||
      splitDim == concatDim || in.shape()[splitDim] % size != 0)
    return Status::invalidInput("split_dim " + std::to_string(splitDim) +
                                " and concat_dim " + std::to_string(concatDim) +
                                " do not fit input " + shapeText(in.shape()) +
                                " over " + std::to_string(size) + " ranks");
  std::vector<int64_t> expected = in.shape();
  expected[splitDim] /= size;
  expected[concatDim] *= size;
  if (out.shape() != expected)
    return Status::invalidInput("out has shape " + shapeText(out.shape()) +
                                ", expected " + shapeText(expected));
  return Launch([in, out, splitDim, concatDim,
                 axis = *axis](const LaunchContext &context) {
    return context.comm->allToAll(in.data, out.data, in.dtype(), in.shape(),
                                  splitDim, concatDim, axis);
  });
}

Result<Launch> bindSliceToRank(const OpCall &c, const OpEnv &env) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  int64_t dim = c.instr->getInt("dim");
  int64_t pieces = env.axisSize(*axis);
  SHARC_TRY(scaledShape(c, dim, 1, pieces));
  const TensorRef &in = c.operands[0], &out = c.results[0];
  // [outer, extent, inner] bytes: this rank's block of every outer row.
  int64_t outer = 1, inner = dtypeSize(in.dtype());
  for (int64_t d = 0; d < dim; ++d)
    outer *= in.shape()[d];
  for (size_t d = dim + 1; d < in.shape().size(); ++d)
    inner *= in.shape()[d];
  int64_t blockBytes = out.shape()[dim] * inner;
  const auto *src =
      static_cast<const std::byte *>(in.data) + env.coord(*axis) * blockBytes;
  return launchKernel(env,
                      kernels::Copy2dArgs{.src = src,
                                          .dst = out.data,
                                          .rows = outer,
                                          .rowBytes = blockBytes,
                                          .srcPitch = in.shape()[dim] * inner,
                                          .dstPitch = blockBytes},
                      SHARC_KERNELS(copy2d));
}

/// A data-parallel gradient bucket: one all_reduce per operand, issued
/// together (operand i is summed into result i).
Result<Launch> bindAllReduceCoalesced(const OpCall &c, const OpEnv &env) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  for (size_t i = 0; i < c.operands.size(); ++i) {
    const TensorRef &in = c.operands[i], &out = c.results[i];
    SHARC_TRY(dtypeIs(out, in.dtype(), "out"));
    SHARC_TRY(numelIs(out, in.numel(), "out"));
  }
  return Launch([c, axis = *axis](const LaunchContext &context) {
    for (size_t i = 0; i < c.operands.size(); ++i)
      SHARC_TRY(context.comm->allReduce(
          c.operands[i].data, c.results[i].data, c.operands[i].dtype(),
          c.operands[i].numel(), ReduceOp::Sum, axis));
    return Status::ok();
  });
}

/// ZeRO-1's buckets: a reduce_scatter (or all_gather) along dim 0 per
/// operand, posted as one group (one NCCL launch for the bucket).
Result<Launch> bindCoalescedAlongDim0(const OpCall &c, const OpEnv &env,
                                      bool scatter) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  int64_t size = env.axisSize(*axis);
  for (size_t k = 0; k < c.operands.size(); ++k)
    SHARC_TRY(scaledShape(c, 0, scatter ? 1 : size, scatter ? size : 1, k)
                  .withContext("member " + std::to_string(k)));
  return Launch([c, scatter, axis = *axis](const LaunchContext &context) {
    SHARC_TRY(context.comm->beginTransfers());
    Status status = Status::ok();
    for (size_t k = 0; k < c.operands.size() && status; ++k) {
      const TensorRef &in = c.operands[k], &out = c.results[k];
      status = scatter ? context.comm->reduceScatter(
                             in.data, out.data, in.dtype(), in.shape(), 0, axis)
                       : context.comm->allGather(in.data, out.data, in.dtype(),
                                                 in.shape(), 0, axis);
    }
    Status ended = context.comm->endTransfers();
    return status ? ended : status;
  });
}

Result<Launch> bindReduceScatterCoalesced(const OpCall &c, const OpEnv &env) {
  return bindCoalescedAlongDim0(c, env, /*scatter=*/true);
}

Result<Launch> bindAllGatherCoalesced(const OpCall &c, const OpEnv &env) {
  return bindCoalescedAlongDim0(c, env, /*scatter=*/false);
}

/// Megatron's f: the identity forward (its transpose is an all_reduce).
Result<Launch> bindReplicate(const OpCall &c, const OpEnv &env) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  const TensorRef &in = c.operands[0], &out = c.results[0];
  SHARC_TRY(dtypeIs(out, in.dtype(), "out"));
  SHARC_TRY(numelIs(out, in.numel(), "out"));
  int64_t numBytes = in.numel() * dtypeSize(in.dtype());
  return launchKernel(env,
                      kernels::Copy2dArgs{.src = in.data,
                                          .dst = out.data,
                                          .rows = 1,
                                          .rowBytes = numBytes,
                                          .srcPitch = numBytes,
                                          .dstPitch = numBytes},
                      SHARC_KERNELS(copy2d));
}

/// column_slice (y = columns [offset, offset + n) of x) and column_insert
/// (columns [offset, offset + n) of y = x): a fused projection's output
/// split by columns and its gradient joined again. Both tensors are
/// [rows, columns] row-major, the narrow one n columns wide.
Result<Launch> bindColumnCopy(const OpCall &c, const OpEnv &env,
                              bool isInsert) {
  const TensorRef &in = c.operands[0], &out = c.results[0];
  const TensorRef &narrow = isInsert ? in : out, &wide = isInsert ? out : in;
  SHARC_TRY(dtypeIs(out, in.dtype(), "out"));
  SHARC_TRY(rankIs(narrow, wide.shape().size(), isInsert ? "x" : "y"));
  if (wide.shape().empty() ||
      !std::equal(wide.shape().begin(), wide.shape().end() - 1,
                  narrow.shape().begin()))
    return Status::invalidInput("x " + shapeText(in.shape()) + " and y " +
                                shapeText(out.shape()) +
                                " must agree in every dimension but the last");
  int64_t offset = c.instr->getInt("offset", -1);
  int64_t width = narrow.shape().back(), total = wide.shape().back();
  if (offset < 0 || offset + width > total)
    return Status::invalidInput("columns [" + std::to_string(offset) + ", " +
                                std::to_string(offset + width) +
                                ") out of range for " + std::to_string(total) +
                                " columns");
  int64_t elementBytes = dtypeSize(in.dtype());
  int64_t rows = total == 0 ? 0 : wide.numel() / total;
  std::byte *columns =
      static_cast<std::byte *>(wide.data) + offset * elementBytes;
  const void *src = isInsert ? in.data : columns;
  void *dst = isInsert ? columns : out.data;
  return launchKernel(
      env,
      kernels::Copy2dArgs{.src = src,
                          .dst = dst,
                          .rows = rows,
                          .rowBytes = width * elementBytes,
                          .srcPitch = (isInsert ? width : total) * elementBytes,
                          .dstPitch =
                              (isInsert ? total : width) * elementBytes},
      SHARC_KERNELS(copy2d));
}

Result<Launch> bindColumnSlice(const OpCall &c, const OpEnv &env) {
  return bindColumnCopy(c, env, /*isInsert=*/false);
}

Result<Launch> bindColumnInsert(const OpCall &c, const OpEnv &env) {
  return bindColumnCopy(c, env, /*isInsert=*/true);
}

/// permute_blocks: block i of y (dim 0 cut into size(order) equal blocks)
/// is block order[i] of x; the balanced split's reordering of a gathered
/// sequence.
Result<Launch> bindPermuteBlocks(const OpCall &c, const OpEnv &env) {
  const TensorRef &x = c.operands[0], &y = c.results[0];
  SHARC_TRY(isFloat(x, "x"));
  SHARC_TRY(dtypeIs(y, x.dtype(), "y"));
  SHARC_TRY(sameShape(y, x, "y"));
  std::vector<int64_t> order = c.instr->getInts("order");
  auto numBlocks = static_cast<int64_t>(order.size());
  std::vector<bool> seen(order.size(), false);
  for (int64_t block : order) {
    if (block < 0 || block >= numBlocks || seen[block])
      return Status::invalidInput("order is not a permutation of 0.." +
                                  std::to_string(numBlocks - 1));
    seen[block] = true;
  }
  if (x.shape().empty() || numBlocks == 0 || x.shape()[0] % numBlocks != 0)
    return Status::invalidInput("dimension 0 of " + shapeText(x.shape()) +
                                " does not cut into " +
                                std::to_string(numBlocks) + " equal blocks");
  if (x.data == y.data)
    return Status::invalidInput("x and y share a buffer");
  int64_t blockBytes = x.numel() / numBlocks * dtypeSize(x.dtype());
  return launchKernel(env,
                      kernels::PermuteBlocksArgs{.src = x.data,
                                                 .dst = y.data,
                                                 .blockBytes = blockBytes,
                                                 .order = std::move(order)},
                      SHARC_KERNELS(permuteBlocks));
}

/// Pipeline transfers: send (operand 0) and recv (result 0) over `axis`
/// to or from stage `peer`, on the communication stream.
Result<Launch> bindPointToPoint(const OpCall &c, const OpEnv &env,
                                bool isSend) {
  auto axis = axisAttr(c);
  if (!axis)
    return axis.status();
  int64_t peer = c.instr->getInt("peer", -1);
  if (peer < 0 || peer >= env.axisSize(*axis))
    return Status::invalidInput("peer " + std::to_string(peer) +
                                " is not a rank of " + *axis + " (" +
                                std::to_string(env.axisSize(*axis)) + ")");
  int64_t tag = c.instr->getInt("tag", 0);
  const TensorRef &tensor = isSend ? c.operands[0] : c.results[0];
  int64_t numBytes = tensor.numel() * dtypeSize(tensor.dtype());
  return Launch([tensor, numBytes, peer, tag, isSend,
                 axis = *axis](const LaunchContext &context) -> Status {
    if (isSend)
      return context.comm->send(tensor.data, numBytes, peer, tag, axis);
    return context.comm->recv(tensor.data, numBytes, peer, tag, axis);
  });
}

Result<Launch> bindSend(const OpCall &c, const OpEnv &env) {
  return bindPointToPoint(c, env, /*isSend=*/true);
}

Result<Launch> bindRecv(const OpCall &c, const OpEnv &env) {
  return bindPointToPoint(c, env, /*isSend=*/false);
}

} // namespace

void addCollectiveOps(std::unordered_map<std::string, OpDef> &table) {
  table["all_reduce"] = {bindAllReduce, 1, 1};
  table["all_reduce_coalesced"] = {bindAllReduceCoalesced, OpDef::kVariadic,
                                   OpDef::kVariadic};
  table["reduce_scatter_coalesced"] = {bindReduceScatterCoalesced,
                                       OpDef::kVariadic, OpDef::kVariadic};
  table["all_gather_coalesced"] = {bindAllGatherCoalesced, OpDef::kVariadic,
                                   OpDef::kVariadic};
  table["all_gather"] = {bindAllGather, 1, 1};
  table["reduce_scatter"] = {bindReduceScatter, 1, 1};
  table["all_to_all"] = {bindAllToAll, 1, 1};
  table["slice_to_rank"] = {bindSliceToRank, 1, 1};
  table["replicate"] = {bindReplicate, 1, 1};
  table["column_slice"] = {bindColumnSlice, 1, 1};
  table["column_insert"] = {bindColumnInsert, 1, 1};
  table["permute_blocks"] = {bindPermuteBlocks, 1, 1};
  table["send"] = {bindSend, 1, 0};
  table["recv"] = {bindRecv, 0, 1};
}

} // namespace sharc::exec
