//===- Divergence.h - find a diverged training state ------------*- C++ -*-===//
// defines: DivergenceWatch, findDivergence
//
// A run whose loss stays finite can still diverge: a gradient whose squared
// norm overflows makes AdamW's second moment infinite (the parameter then
// freezes, m / sqrt(v) = 0, with no error), a NaN gradient makes both
// moments NaN. The moments accumulate every gradient element, so a moment
// that is not finite after a step is a gradient norm that was not finite in
// that step (or before it); a parameter that is not finite is a state no
// checkpoint may hold.
//
//   auto diverged = findDivergence(runtime);
//   if (diverged && *diverged) // "AdamW moment 'w.exp_avg_sq' holds inf"
#pragma once

#include "executor/Runtime.h"
#include "planner/plan/Status.h"

#include <optional>
#include <string>

namespace sharc::exec {

/// Looks at global tensors as they pass, one at a time (a checkpoint's on
/// their way to disk, so the check costs no download of its own), and
/// keeps what holds a NaN or an infinity.
class DivergenceWatch {
public:
  /// isState: an optimizer moment, whose non-finite value is a gradient's.
  void see(const plan::NamedTensor &tensor, bool isState);
  /// The first moment seen that holds one ("the gradient norm is not
  /// finite (AdamW moment 'w.exp_avg_sq' holds inf)"), else the first
  /// parameter ("parameter 'w' holds nan"); nullopt when all were finite.
  std::optional<std::string> verdict() const;

private:
  std::optional<std::string> moment_, param_;
};

/// The verdict over every optimizer state tensor, then every parameter,
/// gathered one at a time.
Result<std::optional<std::string>> findDivergence(const Runtime &runtime);

} // namespace sharc::exec
