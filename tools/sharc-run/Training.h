//===- Training.h - sharc-run's evaluation and checkpoints ------*- C++ -*-===//
// defines: baseLearningRate, evaluate, EvalResult, formatEval,
//          formatCheckpointLine, rotatingCheckpointPath, CheckpointRotation
//
// The parts of a long run that sit around the step loop in main.cpp:
// validation loss and perplexity on a fixed set of batches
// (Runtime::evalLoss, so parameters and optimizer state are untouched),
// and `--save-every N` checkpoints of which the last K are kept.
#pragma once

#include "executor/DataLoader.h"
#include "executor/Runtime.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <deque>
#include <string>

namespace sharc::training {

/// The `lr` of the plan's first adamw (every adamw carries the same), or
/// -1 for a plan without an optimizer.
double baseLearningRate(const plan::Plan &plan);

struct EvalResult {
  double loss = 0.0; ///< mean of the batches' mean token losses
  int64_t batches = 0;
  int64_t tokens = 0;
};

/// The mean loss over the first `maxBatches` batches of `data` (fewer when
/// the file holds fewer whole batches, at least 1), the same batches at
/// every call so that evaluations compare.
Result<EvalResult> evaluate(exec::Runtime &runtime,
                            const exec::DataLoader &data, int64_t maxBatches);

/// "eval step   10  val loss 4.12345  ppl 61.78  (16 batches, 2048 tokens)"
std::string formatEval(int64_t step, const EvalResult &result);

/// "saved ckpt.safetensors (39.12 GB in 41.3 s, 0.95 GB/s)": the file's
/// size as it is on disk and the time the save or load took, for a model
/// whose checkpoint takes long enough to wonder about.
std::string formatCheckpointLine(const char *verb, const std::string &path,
                                 double seconds);

/// ckpt.safetensors at step 120 -> ckpt-step000120.safetensors (any other
/// name gets the suffix at its end).
std::string rotatingCheckpointPath(const std::string &savePath, int64_t step);

/// Writes checkpoints (atomically, as every checkpoint; a diverged state
/// is refused, saveCheckpoint's refuseDiverged) and removes the oldest this
/// run wrote once more than keepLast exist.
class CheckpointRotation {
public:
  CheckpointRotation(std::string savePath, int64_t keepLast)
      : savePath_(std::move(savePath)), keepLast_(keepLast) {}
  /// The path written, for the log line.
  Result<std::string> save(const exec::Runtime &runtime, int64_t dataPosition,
                           exec::DataOrder dataOrder = {});

private:
  std::string savePath_;
  int64_t keepLast_;
  std::deque<std::string> written_;
};

} // namespace sharc::training
