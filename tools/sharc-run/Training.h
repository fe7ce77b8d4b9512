//===- Training.h - sharc-run's evaluation and checkpoints ------*- C++ -*-===//
// defines: baseLearningRate, evaluate, EvalResult, formatEval,
//          formatCheckpointLine, formatSnapshotLine, formatWait,
//          rotatingCheckpointPath, CheckpointRotation, linkOrCopy
//
// The parts of a long run that sit around the step loop in main.cpp:
// validation loss and perplexity on a fixed set of batches
// (Runtime::evalLoss, so parameters and optimizer state are untouched),
// and `--save-every N` checkpoints of which the last K are kept.
#pragma once

#include "executor/Checkpoint.h"
#include "executor/DataLoader.h"
#include "executor/Runtime.h"
#include "planner/plan/Status.h"

#include <chrono>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <optional>
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

/// "saving ckpt-step000010.safetensors in the background (29.55 GB
/// gathered in 3.1 s)": what the step loop waited for.
std::string formatSnapshotLine(const std::string &path, int64_t bytes,
                               double seconds);

/// ", the run waited 6.2 s for it": appended to a background save's line
/// when the run had to wait for the write to finish.
std::string formatWait(double seconds);

/// ckpt.safetensors at step 120 -> ckpt-step000120.safetensors (any other
/// name gets the suffix at its end).
std::string rotatingCheckpointPath(const std::string &savePath, int64_t step);

/// Writes checkpoints (atomically, as every checkpoint; a diverged state
/// is refused, saveCheckpoint's refuseDiverged) and removes the oldest this
/// run wrote once more than keepLast exist. In the background, a save
/// gathers the state into host memory (exec::CheckpointSnapshot; the step
/// loop waits for that alone) and a thread writes the file while training
/// goes on; the next save, and the end of the run, wait for it first.
class CheckpointRotation {
public:
  CheckpointRotation(std::string savePath, int64_t keepLast, bool background)
      : savePath_(std::move(savePath)), keepLast_(keepLast),
        background_(background) {}
  ~CheckpointRotation();
  CheckpointRotation(const CheckpointRotation &) = delete;
  CheckpointRotation &operator=(const CheckpointRotation &) = delete;

  bool background() const { return background_; }
  /// The host memory the background save in flight holds.
  int64_t snapshotBytes() const { return snapshot_ ? snapshot_->bytes() : 0; }
  /// The path written, or being written in the background, for the log
  /// line. In the background, call finished(true) first.
  Result<std::string> save(const exec::Runtime &runtime, int64_t dataPosition,
                           exec::DataOrder dataOrder = {});

  /// A rotating checkpoint an earlier run wrote (--resume), oldest first:
  /// counted against keepLast and removed in turn as if this run had
  /// written it.
  void adopt(const std::string &path, int64_t step) {
    written_.push_back(path);
    lastStep_ = step;
  }

  /// The last checkpoint written (whole on disk) if it is of `step`.
  std::optional<std::string> writtenAt(int64_t step) const {
    if (written_.empty() || lastStep_ != step)
      return std::nullopt;
    return written_.back();
  }

  /// A file a background save wrote.
  struct Written {
    std::string path;
    double seconds = 0.0; ///< the write's, after the gather
  };
  /// The background write that has finished since the last call (with
  /// wait, once it has), or nullopt when none is in flight or it goes on.
  /// A failed write is the run's failure.
  Result<std::optional<Written>> finished(bool wait);

private:
  /// After `path`, the state after `step`, is whole on disk: the oldest
  /// beyond keepLast go.
  void rotate(const std::string &path, int64_t step, bool writesFiles);

  std::string savePath_;
  int64_t keepLast_;
  bool background_;
  std::deque<std::string> written_;
  int64_t lastStep_ = -1; ///< the step of written_.back()
  /// The background write in flight: its snapshot (kept after the write,
  /// its storage gathered into at the next save), file and result.
  std::unique_ptr<exec::CheckpointSnapshot> snapshot_;
  std::string writingPath_;
  int64_t writingStep_ = 0;
  bool writesFiles_ = false; ///< this process writes (not so under mpirun)
  std::future<Status> writing_;
  std::chrono::steady_clock::time_point writeStart_;
  double writeSeconds_ = 0.0;
};

/// Makes `to` the file `from` is, atomically: a hard link where the file
/// system has them, else a copy streamed through host memory.
Status linkOrCopy(const std::string &from, const std::string &to);

} // namespace sharc::training
