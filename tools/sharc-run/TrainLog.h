//===- TrainLog.h - sharc-run --log: one CSV row per step -------*- C++ -*-===//
// defines: TrainLog
//
// A long run is watched, and plotted (scripts/plot-training.py), from a
// file rather than from the console. The schema (docs/data.md):
//   step,kind,loss,lr,grad_norm,tokens_per_s,step_s,elapsed_s,val_loss,val_ppl
// kind `train`: one row per optimizer step, the numbers of its console line
// (lr empty in a plan without an optimizer, grad_norm in one that does not
// clip); kind `val`: one row per evaluation, step being the last step
// trained (0 before the first), with loss, lr, grad_norm, tokens_per_s and
// step_s empty. Each row is flushed when written, so the file can be read
// while the run goes on; it is not atomic, unlike checkpoints and traces,
// for the same reason.
#pragma once

#include "executor/Metrics.h"
#include "planner/plan/Status.h"
#include "tools/sharc-run/Training.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

namespace sharc::training {

class TrainLog {
public:
  /// Creates (or truncates) `path` and writes the header: a path that cannot
  /// be written is bad input, found before the run does any work. A run
  /// that --resume continues after step `continueAfterStep` (>= 0) keeps
  /// the rows an earlier run wrote up to it, so the file holds one
  /// history; the rows of steps that run had gone past are dropped, and
  /// elapsed_s goes on from the kept rows' last.
  static Result<TrainLog> open(const std::string &path,
                               int64_t continueAfterStep = -1);

  Status writeStep(const exec::StepRecord &record);
  /// `elapsedSeconds`: wall time since the run's first step began.
  Status writeEval(int64_t step, const EvalResult &result,
                   double elapsedSeconds);

  /// The shortest decimal that reads back as exactly `value` (so the log
  /// holds the run's numbers, not a rounding of them), or `maxDigits`
  /// significant digits where that is fewer (tokens/s and perplexity are
  /// derived, and read better short); empty for NaN and, when
  /// `unsetBelowZero`, for negative values (StepRecord's "not set").
  static std::string formatNumber(double value, bool unsetBelowZero = false,
                                  int maxDigits = 17);

private:
  struct Closer {
    void operator()(std::FILE *file) const { std::fclose(file); }
  };
  TrainLog(std::string path, std::FILE *file)
      : path_(std::move(path)), file_(file) {}
  Status writeRow(const std::string &row);

  std::string path_;
  std::unique_ptr<std::FILE, Closer> file_;
  /// Added to every row's elapsed_s: the earlier runs' time on --resume.
  double elapsedOffset_ = 0;
};

} // namespace sharc::training
