//===- Resume.h - where a run that was stopped goes on ----------*- C++ -*-===//
// defines: ResumePoint, findResumePoint, shareResumePoint, applyResume
//
// `sharc-run PLAN --steps N --save CKPT [--save-every K] --resume`, run
// again after a stop (a signal, a node lost, a job requeued), continues
// from the newest checkpoint of CKPT and its rotating files
// (CKPT-stepNNNNNN, Training.h) and ends at step N. "Newest" is the step
// each file's metadata holds, not its time stamp or name: a file copied in
// from elsewhere counts as what it is. Every checkpoint is written
// atomically, so a file at one of these names is whole; one that cannot
// be read (another tool's file) is skipped and named.
//
//   auto point = applyResume(options, processes); // --load, --steps set
#pragma once

#include "executor/Processes.h"
#include "planner/plan/Status.h"
#include "tools/sharc-run/RunFlags.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sharc::training {

struct ResumePoint {
  std::string path; ///< the checkpoint to load
  int64_t step = 0; ///< its step (the steps it has trained)
  /// The rotating checkpoints beside it, by step, oldest first: the run
  /// counts them against --keep-last as if it had written them.
  std::vector<std::pair<int64_t, std::string>> rotating;
  /// Files at a checkpoint's name that could not be read, with why.
  std::vector<std::string> skipped;
};

/// The newest checkpoint among savePath and its rotating files; nullopt
/// where none exists (a first run). Ties prefer savePath, the final file.
Result<std::optional<ResumePoint>> findResumePoint(const std::string &savePath);

/// Process 0's point, for every process of the run: all of them load the
/// same file even where they see the folder at different moments.
Result<std::optional<ResumePoint>>
shareResumePoint(exec::Processes &processes, std::optional<ResumePoint> point);

/// For `options.resume`: finds the point (process 0, shared with the
/// others), says what it found, and makes it the run's --load with the
/// steps left to --steps; nullopt (and nothing changed) otherwise.
Result<std::optional<ResumePoint>> applyResume(RunFlags &options,
                                               exec::Processes &processes);

} // namespace sharc::training
