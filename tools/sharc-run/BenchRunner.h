//===- BenchRunner.h - run every point of a benchmark sweep -----*- C++ -*-===//
// defines: runBenchPoint, runBenchMain
//
// `sharc-run --bench MANIFEST [--backend B] [--output_csv FILE]`: one
// process runs every point of the manifest in order (BenchManifest.h),
// prints a progress line per point, the console table and writes the CSV
// (BenchReport.h). One point, the original's iteration and timing
// (seed-system.md, 3.6 and 3.7):
//  - fresh weights (initParams) and synthetic tokens; warmup_iters steps,
//    then benchmark_iters timed steps, each a whole training step (forward,
//    loss, backward, AdamW). Runtime::step's time is the wall time until
//    every stream of every rank has finished, i.e. already the max over
//    ranks; the row takes the median of the timed steps (the original takes
//    the mean, which one slow step skews).
//  - tokens/s = global batch x seq_len / step time; MFU = tokens/s x
//    flops_per_token / (world size x peak FLOP/s per GPU).
//  - planned peak: the sum of the plan's regions for one rank, every byte
//    the plan allocates (nothing is allocated during a step). Measured: on
//    cuda the device bytes in use after the timed steps, max over ranks
//    (CUDA context, NCCL and GEMM workspaces included); none on the cpu.
//  - oom: the plan needs more than the rank can get (BenchMemory.h), or a
//    host allocation throws; any other failure is an error row whose
//    reason is the failure's Status message (which names the rank).
#pragma once

#include "tools/sharc-run/BenchManifest.h"

#include <string>

namespace sharc::benchrun {

/// Runs one point on `backend` ("auto", "cpu" or "cuda").
BenchResult runBenchPoint(const BenchManifest &manifest,
                          const BenchPointSpec &point,
                          const std::string &backend);

/// `sharc-run --bench ...` (argv[1] is --bench): the exit status, 0 when
/// every row is ok or oom, 1 when some row is an error, 2 on bad input.
int runBenchMain(int argc, char **argv);

} // namespace sharc::benchrun
