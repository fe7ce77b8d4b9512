//===- Metrics.h - per-step loss, time and throughput -----------*- C++ -*-===//
// defines: StepRecord, Metrics
//
// tokens/s is global tokens per step (batch * seq over all data-parallel
// ranks) over the step's wall time; the summary uses the median step time,
// which a slow first step (page faults, thread start-up) does not skew.
#pragma once

#include "executor/Runtime.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace sharc::exec {

struct StepRecord {
  int64_t step = 0;
  double loss = 0.0;
  double seconds = 0.0;
  double tokensPerSecond = 0.0;
  /// Shown by formatStep only when set (>= 0): the step's learning rate,
  /// the wall time since the run's first step and the estimated rest.
  double lr = -1.0;
  double elapsedSeconds = -1.0;
  double etaSeconds = -1.0;
  /// The global gradient norm before clipping; shown when not NaN.
  double gradNorm = std::numeric_limits<double>::quiet_NaN();
};

class Metrics {
public:
  explicit Metrics(int64_t tokensPerStep) : tokensPerStep_(tokensPerStep) {}

  const StepRecord &record(int64_t step, const StepStats &stats);
  const std::vector<StepRecord> &records() const { return records_; }
  double medianSeconds() const;
  double medianTokensPerSecond() const;

  /// "step    1  loss 4.85231  lr 1.000e-03  grad_norm 1.234  time 123.4 ms
  ///  tokens/s 1234  elapsed 0:00:01  eta 0:02:03" (lr, grad_norm, elapsed
  ///  and eta when set)
  static std::string formatStep(const StepRecord &record);
  /// One line: steps, first and last loss, median time and tokens/s.
  std::string summary() const;
  /// Seconds as H:MM:SS.
  static std::string formatDuration(double seconds);

private:
  int64_t tokensPerStep_;
  std::vector<StepRecord> records_;
};

} // namespace sharc::exec
