//===- GenerateText.h - sharc-run --generate ---------------------*- C++
//-*-===//
// defines: printGeneration
//
// sharc-run's generation mode: the rows' continuations of the prompts
// (executor/Generation.h), printed id by id as they come, in the lines
// scripts/generate.py reads and decodes:
//   token I: ID...      (every row's I-th new id, once all have drawn it)
//   sample B: ID...     (row B's new ids, at the end)
// and, unless --quiet, a first line of what is generated and a last one of
// the milliseconds a token.
#pragma once

#include "executor/Runtime.h"
#include "planner/plan/Status.h"
#include "tools/sharc-run/RunFlags.h"

namespace sharc {

/// Generates from `options`' prompts and sampling flags on `runtime` (a
/// decode plan or one that emits its logits) and prints it.
Status printGeneration(exec::Runtime &runtime, const RunFlags &options);

} // namespace sharc
