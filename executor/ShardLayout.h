//===- ShardLayout.h - the part of a tensor a rank holds --------*- C++ -*-===//
// defines: meshCoords, ShardSlice, shardSlice, stageOfRank, isShardOwner,
// numElements,
//          convertElements, convertElementsInParallel, sameElements,
//          copyGlobalToLocal, copyLocalToGlobal,
//          localSpanOf, copyLocalRangeToGlobal
//
// A rank's place in the mesh and the part of a global tensor it holds. The
// plan is SPMD, so everything rank-dependent (parameter init, checkpoint
// slices, token windows, gathered outputs) goes through these functions:
//
//   auto coords = meshCoords(plan.mesh, rank);          // [dp, tp]
//   auto slice = shardSlice(plan.mesh, entry.sharding, entry.globalShape,
//                           coords);                    // local view
//   copyGlobalToLocal(globalBytes, DType::F32, *slice, localPtr, DType::BF16);
#pragma once

#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <vector>

namespace sharc::exec {

/// Coordinates of `rank` along each mesh axis, the last axis fastest
/// (tp innermost): in a [dp, tp] mesh, tp = rank % tpSize, dp = rank / tpSize.
std::vector<int64_t> meshCoords(const std::vector<plan::MeshAxis> &mesh,
                                int64_t rank);

/// The part of a global tensor one rank holds: a global dim split over one
/// or more mesh axes is cut into contiguous equal pieces, the outer mesh
/// axis varying slowest; along the sharding's balanced axis a piece is two
/// chunks (r and 2n-1-r of 2n), so a dim may map to two runs of global
/// indices (kernels/SequencePositions.h).
struct ShardSlice {
  /// Consecutive local indices [localStart, localStart + length) of one dim
  /// at global indices [globalStart, ...).
  struct Run {
    int64_t globalStart, length;
  };
  std::vector<int64_t> globalShape;
  std::vector<int64_t> localShape;
  std::vector<int64_t> start; ///< first global index along each dim
  /// Per dim, in local order; a dim without runs (a slice built by hand)
  /// is one run from its start.
  std::vector<std::vector<Run>> runs = {};

  /// The global index along `dim` of local index `local`.
  int64_t globalOf(size_t dim, int64_t local) const;
  /// Global row-major element index of local row-major element `local`.
  int64_t globalIndex(int64_t local) const;
};

/// Fails (invalidInput) when the sharding names a dim out of range or a
/// split that does not divide the dimension.
Result<ShardSlice> shardSlice(const std::vector<plan::MeshAxis> &mesh,
                              const plan::Sharding &sharding,
                              const std::vector<int64_t> &globalShape,
                              const std::vector<int64_t> &coords);

/// True when this rank's slice is the canonical copy of its data: its
/// coordinate is 0 on every axis the tensor is replicated on. Gathering
/// a global tensor reads from owners only. A tensor of one pipeline stage
/// (Sharding::stage) is owned on that stage's ranks instead of coordinate 0.
/// The rank's coordinate on plan::kStageAxis (its pipeline stage), or -1
/// when the mesh has no such axis.
int64_t stageOfRank(const std::vector<plan::MeshAxis> &mesh, int64_t rank);

bool isShardOwner(const std::vector<plan::MeshAxis> &mesh,
                  const plan::Sharding &sharding,
                  const std::vector<int64_t> &coords);

int64_t numElements(const std::vector<int64_t> &shape);

/// Converts `count` elements between storage types (float types round to
/// nearest even on the way down; a plain copy when the types agree).
void convertElements(const void *src, DType srcType, void *dst, DType dstType,
                     int64_t count);
/// As convertElements, over the host's threads for a large count (a model's
/// weights rounded from its f32 masters).
void convertElementsInParallel(const void *src, DType srcType, void *dst,
                               DType dstType, int64_t count);

/// Whether two slices of one tensor hold the same elements in the same
/// local order.
bool sameElements(const ShardSlice &a, const ShardSlice &b);

/// Copies this slice out of a whole global tensor into local storage.
void copyGlobalToLocal(const void *global, DType globalType,
                       const ShardSlice &slice, void *local, DType localType);

/// Copies local storage into its place in a whole global tensor.
void copyLocalToGlobal(const void *local, DType localType,
                       const ShardSlice &slice, void *global, DType globalType);

/// The local elements [begin, end) of a slice's storage that hold every
/// element it has of the flattened global tensor's [globalBegin,
/// globalEnd); begin == end when it has none. The span may include
/// elements outside that range (other columns of a row the slice splits).
struct LocalSpan {
  int64_t begin = 0, end = 0;
};
LocalSpan localSpanOf(const ShardSlice &slice, int64_t globalBegin,
                      int64_t globalEnd);

/// copyLocalToGlobal for the flattened global elements [globalBegin,
/// globalEnd) alone: `local` holds the slice's local elements from
/// `localBegin` on (localSpanOf's), and `global` receives element
/// globalBegin at its start.
void copyLocalRangeToGlobal(const void *local, DType localType,
                            int64_t localBegin, const ShardSlice &slice,
                            int64_t globalBegin, int64_t globalEnd,
                            void *global, DType globalType);

} // namespace sharc::exec
