//===- Checkpoint.h - params and adam state as safetensors ------*- C++ -*-===//
// defines: saveCheckpoint, loadCheckpoint
//
// A checkpoint holds global (unsharded) tensors, so any plan of the same
// model (dense, tp, dp, ...) can resume from it: parameters by name in their
// storage type, and with optimizer state "<param>.exp_avg" and
// "<param>.exp_avg_sq". Metadata: format = "sharc-checkpoint", model, and
// step (the number of optimizer steps already taken).
#pragma once

#include "executor/Runtime.h"
#include "planner/plan/Status.h"

#include <string>

namespace sharc::exec {

Status saveCheckpoint(const Runtime &runtime, const std::string &path,
                      bool withOptimizerState = true);

/// Loads the parameters; when the file carries optimizer state, loads it
/// too and continues the step count, otherwise the optimizer starts fresh.
/// A missing or mis-shaped tensor is invalid input naming it.
Status loadCheckpoint(Runtime &runtime, const std::string &path);

} // namespace sharc::exec
