//===- BenchReport.h - progress lines, console table, CSV -------*- C++ -*-===//
// defines: formatProgress, formatTables, writeCsv, kBenchCsvColumns
//
// The original orchestrator's output (seed-system.md, 3.8): rows are the
// scanned value (layers or seq_len), columns the modes, each cell the value
// and its percentage of the baseline (ddp when it ran, else the first
// mode) in parentheses, as the tables of the original's section 6.1. The
// CSV has the original's columns in its order, then mfu, planned_peak_mib,
// exposed_comm_ms, predicted_step_ms, simulated_bubble and reason.
#pragma once

#include "planner/plan/Status.h"
#include "tools/sharc-run/BenchManifest.h"

#include <string>
#include <vector>

namespace sharc::benchrun {

extern const char *const kBenchCsvColumns;

/// "[3/12] layers 4   TP + SP   123.4K tokens/s, 12.3 ms, ..."
std::string formatProgress(const BenchManifest &manifest, size_t index,
                           const BenchResult &result);

/// The tables of the kind: throughput gives tokens/s (K) and planned
/// peak; memory gives planned peak, measured peak (on cuda) and step ms.
std::string formatTables(const BenchManifest &manifest,
                         const std::vector<BenchResult> &results);

Status writeCsv(const std::string &path, const BenchManifest &manifest,
                const std::vector<BenchResult> &results);

} // namespace sharc::benchrun
