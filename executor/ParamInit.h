//===- ParamInit.h - shard-independent param init ---------------*- C++ -*-===//
// defines: initValue, initShard, splitmix64, fnv1a
//
// A parameter's value is a pure function of (seed, parameter name, global
// element index), drawn from a counter-based generator rather than a
// sequential stream. A rank therefore initialises its shard by mapping each
// local index to its global index, and the shards of a sharded run together
// equal exactly the weights of the dense run with the same seed.
//   normal: key = splitmix64(seed ^ fnv1a(name)),
//           u1 = (splitmix64(key + 2i) >> 11 + 1) / 2^53   in (0, 1]
//           u2 = (splitmix64(key + 2i + 1) >> 11) / 2^53   in [0, 1)
//           w[i] = stddev * sqrt(-2 ln u1) cos(2 pi u2)     (Box-Muller)
//   ones:  w[i] = 1;   zeros: w[i] = 0
#pragma once

#include "executor/ShardLayout.h"
#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <string_view>

namespace sharc::exec {

uint64_t splitmix64(uint64_t x);
uint64_t fnv1a(std::string_view text);

/// The initial value of global element `globalIndex` of parameter `name`.
double initValue(const plan::InitSpec &spec, uint64_t seed,
                 std::string_view name, int64_t globalIndex);

/// Fills this rank's shard (`slice` of the parameter) in storage `dtype`.
/// Fails (invalidInput) for an unknown init kind.
Status initShard(const plan::InitSpec &spec, uint64_t seed,
                 std::string_view name, const ShardSlice &slice, void *local,
                 DType dtype);

} // namespace sharc::exec
