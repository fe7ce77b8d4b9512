//===- NumericsSupport.h - numerics test helpers ----------------*- C++ -*-===//
// defines: compilePlan, compileDecodePlan, compileEdited, compileTinyBatch,
// makeRuntime,
//          maxAbsError, maxAbs, relativeL2, fixturePath, valuesOf,
//          compareTensors, TrainedRun, trainOnRandomTokens,
//          requireLossesMatch, requireParamsMatchByMean,
//          requireTrainsLikeDense, requireStageActivationUnits
//
// The numerics tests compile a model file in-process (the same driver as
// `sharc compile`), run the plan on the CPU backend and compare tensors
// against an independent reference.
#pragma once

#include "executor/Runtime.h"
#include "planner/plan/SafeTensors.h"
#include "tools/sharc/CompileDriver.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace sharc::testing {

/// Compiles `models/<name>` (relative to the source tree); fails the
/// current test on a compile error.
plan::Plan compilePlan(const std::string &modelFile, bool emitLogits,
                       bool withOptimizer, const std::string &runFile = "");

/// Compiles `models/<name>`'s generation step (`sharc compile --decode`),
/// with a prefill of `prefillRows` positions (`--prefill-rows`) unless 0.
plan::Plan compileDecodePlan(const std::string &modelFile,
                             int64_t prefillRows = 0);

/// Compiles a model file given by its path.
plan::Plan compilePlanFile(const std::string &path,
                           const PipelineOptions &pipeline,
                           bool emitLogits = false);

/// Compiles with a parallel layout (and whatever else `pipeline` asks),
/// with the run file `models/<runFile>` when one is named.
plan::Plan compilePlan(const std::string &modelFile,
                       const PipelineOptions &pipeline, bool emitLogits,
                       const std::string &runFile = "");

/// Compiles `models/<modelFile>` with the first occurrence of each edit's
/// first text replaced by its second (each must occur), through a
/// temporary file: how tests vary one model's layers, batch and ties.
plan::Plan
compileEdited(const std::string &modelFile,
              const std::vector<std::pair<std::string, std::string>> &edits,
              const PipelineOptions &pipeline, bool emitLogits = false,
              const std::string &runFile = "");

/// models/tiny.yaml with a step of `batch` sequences in `count`
/// microbatches of batch/count (sharc-microbatch when count > 1).
plan::Plan compileTinyBatch(int64_t batch, int64_t count,
                            const PipelineOptions &pipeline);

std::unique_ptr<exec::Runtime> makeRuntime(const plan::Plan &plan);

std::string fixturePath(const std::string &name);

double maxAbs(const std::vector<double> &values);
double maxAbsError(const std::vector<double> &actual,
                   const std::vector<double> &expected);
double relativeL2(const std::vector<double> &actual,
                  const std::vector<double> &expected);

/// A tensor's elements as doubles.
std::vector<double> valuesOf(const plan::NamedTensor &tensor);

/// max |a - b| <= tolerance * max |b| over every tensor of `reference`
/// whose name starts with `prefix`; returns how many were compared.
int compareTensors(const plan::TensorFile &actual,
                   const plan::TensorFile &reference, const std::string &prefix,
                   double tolerance);

/// What trainOnRandomTokens saw: each step's loss and global gradient norm
/// (NaN where the plan does not clip), the outputs after the first step and
/// the parameters after the last.
struct TrainedRun {
  std::vector<double> losses, gradNorms;
  plan::TensorFile firstOutputs, params;
};

/// Trains `plan` from initParams(paramSeed) for `steps` steps, each on a
/// new batch of ids drawn from dataSeed, so that two layouts of one model
/// given the same seeds train on the same data from the same weights. With
/// `scatteredLabels`, labels are -100 at random positions, more of them the
/// later the sequence (sequence b keeps about (B-b)/B of its labels) and
/// the first half of every odd sequence: each dp rank, microbatch and
/// sequence shard then holds a different number of valid labels.
TrainedRun trainOnRandomTokens(const plan::Plan &plan, int steps,
                               uint64_t paramSeed, uint32_t dataSeed,
                               bool scatteredLabels = false);

/// Every step's loss of `run` within 1e-5 relative of `dense`'s: fp32 sums
/// in another order move the loss by a few ulps a step.
void requireLossesMatch(const TrainedRun &run, const TrainedRun &dense);

/// Every parameter of `dense` after the last step against `run`'s, by the
/// mean (as executor/Validation: Adam's first steps move an element with a
/// near-zero gradient by up to 2 lr on fp32 noise alone): mean |error| at
/// most 1e-4 of mean |dense|. A padded vocabulary adds rows after the dense
/// ones that are never read; only the dense prefix is compared.
void requireParamsMatchByMean(const TrainedRun &run, const TrainedRun &dense);

/// What a sharded layout's parity test asks of its run against the dense
/// one from the same weights and data: every gradient after the first step
/// within 1e-5 of the dense one's largest element, every step's loss within
/// 1e-5 relative, and, where `paramTolerance` > 0, every parameter after
/// the last step within it (Adam's first steps move an element with a
/// near-zero gradient by up to 2 lr on fp32 noise, so 2e-3 where the
/// reduction order differs).
void requireTrainsLikeDense(const TrainedRun &split, const TrainedRun &whole,
                            double paramTolerance = 0);

/// Each pipeline stage's planned activation bytes (the memory report's) for
/// a plan of `count` microbatches under `schedule`.
using StageActivationBytes = std::function<std::vector<int64_t>(
    int64_t count, const std::string &schedule)>;

/// The planner's per-stage activation memory against the analytic count:
/// a stage holds base + M x unit, unit one microbatch's saved activations
/// (measured from GPipe at M = 2 and 3); at M = 8 GPipe must hold 8 units
/// and 1F1B min(stages - r, 8) on stage r. Best fit packs a little
/// differently at each count (alignment, the accumulators' places), so the
/// count of units is what must be exact: each within half a unit.
void requireStageActivationUnits(const StageActivationBytes &stageBytes,
                                 int64_t numStages);

} // namespace sharc::testing
