//===- Divergence.h - find a diverged training state ------------*- C++ -*-===//
// defines: findDivergence
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

/// What holds a NaN or an infinity, optimizer state first (it shows the
/// gradient), then parameters; nullopt when every value is finite.
Result<std::optional<std::string>> findDivergence(const Runtime &runtime);

} // namespace sharc::exec
