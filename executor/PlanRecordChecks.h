//===- PlanRecordChecks.h - a plan's records against themselves -*- C++ -*-===//
// defines: checkPlanRecords
//
// What Runtime::create checks of a plan before it allocates anything: mesh
// sizes, buffers inside their regions and of their dtype's size, parameter,
// input and output tables naming real buffers of the right shape and
// sharding, every instruction's buffer ids, streams and events in range.
// The plan reader checks the same facts; plans built in memory (tests, the
// numerics suite) skip the reader and meet them here.
//
//   SHARC_TRY(checkPlanRecords(plan)); // invalidInput naming the record
#pragma once

#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

namespace sharc::exec {

Status checkPlanRecords(const plan::Plan &plan);

} // namespace sharc::exec
