//===- ParamInit.h - shard-independent param init ---------------*- C++ -*-===//
// defines: drawKey, sliceRowStarts, ShardDraw, shardDraw, initValue,
//          initShard, splitmix64, fnv1a
//
// A parameter's value is a pure function of (seed, parameter name, global
// element index), drawn from a counter-based generator rather than a
// sequential stream. A rank therefore initialises its shard by mapping each
// local index to its global index, and the shards of a sharded run together
// equal exactly the weights of the dense run with the same seed.
//   normal: key = splitmix64(seed ^ fnv1a(name)), then element i is
//           kernels::drawNormal(stddev, key, i) (Box-Muller on the counter
//           pair 2i, 2i + 1; kernels/ParamDraw.h), the same bits on the
//           host and on a GPU
//   ones:  w[i] = 1;   zeros: w[i] = 0
#pragma once

#include "executor/ShardLayout.h"
#include "kernels/ParamDraw.h"
#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace sharc::exec {

using kernels::splitmix64;
uint64_t fnv1a(std::string_view text);

/// The key of parameter `name`'s normal draw under `seed`.
uint64_t drawKey(uint64_t seed, std::string_view name);

/// The global index of the first element of each local row (the slice's
/// last dimension) of `slice`; a row's elements follow it one by one.
std::vector<int64_t> sliceRowStarts(const ShardSlice &slice);

/// The normal draw of `slice` of parameter `name` into `out`, with the row
/// table its arguments point at (kept by the struct: a moved vector keeps
/// its storage).
struct ShardDraw {
  std::vector<int64_t> rowStarts;
  kernels::NormalDrawArgs args;
};
ShardDraw shardDraw(const plan::InitSpec &spec, uint64_t seed,
                    std::string_view name, const ShardSlice &slice,
                    kernels::TensorView out);

/// The initial value of global element `globalIndex` of parameter `name`.
double initValue(const plan::InitSpec &spec, uint64_t seed,
                 std::string_view name, int64_t globalIndex);

/// Fills this rank's shard (`slice` of the parameter) in storage `dtype`,
/// in host memory. Fails (invalidInput) for an unknown init kind.
Status initShard(const plan::InitSpec &spec, uint64_t seed,
                 std::string_view name, const ShardSlice &slice, void *local,
                 DType dtype);

} // namespace sharc::exec
