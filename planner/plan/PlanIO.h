//===- PlanIO.h - read and write plan files ---------------------*- C++ -*-===//
// defines: PlanChecks, readPlanFile, parsePlan, writePlan, writePlanFile
//
// A plan file is YAML, versioned by its first key (`sharc_plan: 1`) and
// documented in docs/plan-format.md. Reading validates everything a hand edit
// could break (keys, kinds, ids, ranges, regions), then the contract
// (PlanContract.h: op schemas, mesh axes, dtypes, event order, buffer
// overlap), and reports the first problem as
// Status::invalidInput("FILE:LINE:COL: message"); it never throws.
// Writing is exact: parsePlan(writePlan(p)) equals p field for field, with
// every double written in its shortest round-tripping form.
#pragma once

#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <string>

namespace sharc::plan {

/// What reading checks. Every tool reads with All; FormatOnly skips the
/// contract, for tests of the file format itself.
enum class PlanChecks : uint8_t { All, FormatOnly };

/// Reads and validates a plan file. A file that cannot be opened is invalid
/// input (the path came from the user); a malformed plan names FILE:LINE:COL.
Result<Plan> readPlanFile(const std::string &path,
                          PlanChecks checks = PlanChecks::All);

/// Parses plan text; fileName only prefixes the messages. A broken contract
/// points at the attribute, instruction or buffer at fault.
Result<Plan> parsePlan(const std::string &text, const std::string &fileName,
                       PlanChecks checks = PlanChecks::All);

/// The plan as YAML text: scalars and tables in block style, one buffer,
/// parameter, io entry or instruction per line in flow style.
std::string writePlan(const Plan &plan);

/// Writes writePlan(plan) to path; a failed write is a runtime error.
Status writePlanFile(const Plan &plan, const std::string &path);

} // namespace sharc::plan
