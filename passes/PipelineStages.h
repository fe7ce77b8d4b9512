//===- PipelineStages.h - pipeline stages and schedules ---------*- C++ -*-===//
// defines: kMicrobatchAttr, kForwardAttr, kAllChunksAttr, PipelineSlot,
//          pipelineSlots, splitLayers, balanceLayers
//
// What the two pipeline passes share: the op attributes they communicate
// through (sharc-adamw marks its norm with one) and the plain algorithms
// (no IR), tested on their own.
//
//   // pp = 2, M = 3, 1F1B, stage 0: F0, F1, B0, F2, B1, B2
//   std::vector<PipelineSlot> order = pipelineSlots("1f1b", 2, 0, 3);
//   // L = 5 over 2 stages: {0, 2, 5} (2 and 3 layers)
//   std::vector<int64_t> bounds = splitLayers(5, 2);
#pragma once

#include "ir/ArgumentRoles.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <vector>

namespace sharc {

/// The microbatch an op belongs to (i64), set by sharc-microbatch.
inline constexpr llvm::StringLiteral kMicrobatchAttr = "sharc.microbatch";
/// Marks the forward ops (unit), set by sharc-pipeline-partition.
inline constexpr llvm::StringLiteral kForwardAttr = "sharc.forward";
/// Marks an op that sharc-adamw staged itself and that runs once on its
/// stage's ranks for all of their model chunks (unit): clipping's norm, a
/// sum over every chunk's gradients that every chunk's updates read.
/// sharc-pipeline-schedule keeps its stage and joins no virtual stage
/// through it.
inline constexpr llvm::StringLiteral kAllChunksAttr = "sharc.all_chunks";

/// One step of a stage's schedule: the forward or backward of microbatch m
/// on model chunk `chunk` of the stage (0 unless interleaved).
struct PipelineSlot {
  bool backward = false;
  int64_t microbatch = 0;
  int64_t chunk = 0;
  bool operator==(const PipelineSlot &other) const {
    return backward == other.backward && microbatch == other.microbatch &&
           chunk == other.chunk;
  }
};

/// The order stage `stage` of `numStages` runs the 2M steps of M
/// microbatches in (seed-system.md 4.4): "gpipe" or "1f1b"; or with
/// "interleaved", the 2 M v steps of M microbatches on v = numChunks model
/// chunks a stage (Megatron's interleaved 1F1B: chunk c of stage r is
/// virtual stage r + c P; forwards go P microbatches a chunk at a time,
/// (P - r - 1) 2 + (v - 1) P of them before the first backward; needs M a
/// multiple of P). Empty for an unknown schedule.
std::vector<PipelineSlot> pipelineSlots(llvm::StringRef schedule,
                                        int64_t numStages, int64_t stage,
                                        int64_t numMicrobatches,
                                        int64_t numChunks = 1);

/// The original's split: stage r holds layers [bounds[r], bounds[r+1]),
/// bounds[r] = floor(L r / P). Needs numLayers >= numStages >= 1.
std::vector<int64_t> splitLayers(int64_t numLayers, int64_t numStages);

/// The contiguous split (every stage at least one layer) whose costliest
/// stage is cheapest: stage 0 also pays `firstCost`, the last `lastCost`.
/// Ties go to smaller earlier stages, as in splitLayers. Bounds as there.
std::vector<int64_t> balanceLayers(const std::vector<double> &layerCost,
                                   double firstCost, double lastCost,
                                   int64_t numStages);

} // namespace sharc
