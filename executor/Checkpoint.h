//===- Checkpoint.h - params and adam state as safetensors ------*- C++ -*-===//
// defines: saveCheckpoint, CheckpointSnapshot, checkpointBytes,
//          snapshotFits, checkpointStep, loadCheckpoint
//
// A checkpoint holds global (unsharded) tensors, so any plan of the same
// model (dense, tp, dp, ...) can resume from it: parameters by name in their
// storage type (under bf16-mixed the f32 master, of which the bf16 weights
// are the rounding, so a resumed run continues exactly), and with
// optimizer state "<param>.exp_avg" and "<param>.exp_avg_sq".
// Metadata: format = "sharc-checkpoint", model, step (the number of
// optimizer steps already taken, which is also the position in the
// learning-rate schedule, a function of the step), the plan's lr_schedule
// as text, and data_position (the token windows the run has consumed,
// DataLoader.h) with, for a shuffled run, data_shuffle "<stride>/<windows>"
// (DataOrder), so a resumed run continues both exactly. The vocabulary
// rows that vocabulary parallelism pads embed_tokens and lm_head with are
// left out (and zero when loaded), so a checkpoint of a padded layout loads
// on an unpadded one and back.
#pragma once

#include "executor/DataLoader.h"
#include "executor/Runtime.h"
#include "planner/plan/Status.h"

#include <map>
#include <string>
#include <vector>

namespace sharc::exec {

/// dataPosition < 0: none is written (a run without a data stream). Under
/// mpirun every process calls it (the tensors are gathered over all of
/// them) and the first one writes the file. The tensors are gathered and
/// written one at a time, so host memory holds one tensor, not the model.
/// With refuseDiverged, each tensor is checked on its way
/// (DivergenceWatch): a state holding a NaN or an infinity leaves whatever
/// was at `path` as it was and is a runtime error, "<verdict>: the run
/// diverged; nothing was saved".
Status saveCheckpoint(const Runtime &runtime, const std::string &path,
                      bool withOptimizerState = true, int64_t dataPosition = -1,
                      DataOrder dataOrder = {}, bool refuseDiverged = false);

/// A checkpoint with optimizer state gathered into host memory at one
/// step, to be written later, on another thread while training goes on
/// (sharc-run's background --save-every): write() makes the file
/// saveCheckpoint makes at that step, byte for byte. The process that
/// writes holds the whole checkpoint (bytes(); checkpointBytes tells
/// beforehand); under mpirun the others take part in the gather and hold
/// nothing.
class CheckpointSnapshot {
public:
  /// Collective under mpirun, as saveCheckpoint; refuseDiverged as there.
  /// The tensors are gathered into `previous`'s storage (taken from it),
  /// whose pages the process has already touched: the first snapshot of a
  /// large model gathers at the speed of page faults, the next ones at a
  /// copy's.
  static Result<CheckpointSnapshot>
  take(const Runtime &runtime, int64_t dataPosition = -1,
       DataOrder dataOrder = {}, bool refuseDiverged = false,
       CheckpointSnapshot *previous = nullptr);
  /// Writes the file atomically (nothing on a process that does not
  /// write). Touches no runtime, so any thread may call it.
  Status write(const std::string &path) const;
  /// The tensors' bytes held in host memory.
  int64_t bytes() const { return bytes_; }

private:
  std::map<std::string, std::string> metadata_;
  std::vector<plan::TensorSpec> specs_;
  std::vector<plan::NamedTensor> tensors_;
  int64_t bytes_ = 0;
  bool writes_ = false;
};

/// The bytes of a checkpoint's tensors (its file, less the header).
int64_t checkpointBytes(const Runtime &runtime, bool withOptimizerState = true);

/// Whether a snapshot of `bytes` leaves the host at least half of the
/// `availableBytes` it has (memAvailableBytes; -1: unknown, which does not
/// fit); else, in `why`, what it would take of what.
bool snapshotFits(int64_t bytes, int64_t availableBytes, std::string &why);

/// Loads the parameters; when the file carries optimizer state, loads it
/// too and continues the step count, otherwise the optimizer starts fresh.
/// A missing or mis-shaped tensor is invalid input naming it.
/// With dataPosition, it receives the file's data_position, range-checked,
/// or -1 when the file has none (a checkpoint from before it existed).
/// With dataOrder, it receives the file's data_shuffle ({0, 0}: file
/// order), a malformed one invalid input.
/// The step a checkpoint's metadata holds: -1 where it has none, invalid
/// input where it is not a count in [0, 10^12] (loadCheckpoint's check).
Result<int64_t>
checkpointStep(const std::map<std::string, std::string> &metadata);

Status loadCheckpoint(Runtime &runtime, const std::string &path,
                      int64_t *dataPosition = nullptr,
                      DataOrder *dataOrder = nullptr);

} // namespace sharc::exec
