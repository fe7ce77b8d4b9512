//===- RunFlags.h - sharc-run's flags, parsed and checked -------*- C++ -*-===//
// defines: RunFlags, parseRunFlags
//
// What one `sharc-run PLAN ...` asks for (--help lists it). Flags that
// contradict each other, or that a mode would drop without a word, are
// refused here, before any file is read, with exit status 2 as bad input.
// `sharc-run --bench` has flags of its own (BenchRunner.h).
//
//   auto flags = parseRunFlags(argc, argv); // prints --help and exits 0
//   if (!flags)
//     return fail(flags.status());
#pragma once

#include "planner/plan/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sharc {

struct RunFlags {
  std::string planPath;
  std::string backend = "auto";
  int64_t steps = 10;
  int64_t timeoutSeconds = 60;
  bool compareCpu = false;
  uint64_t seed = 42;
  std::string dataPath; ///< empty: synthetic
  std::string loadPath, savePath, dumpPath;
  /// --resume: load the newest of savePath and its rotating checkpoints
  /// (tools/sharc-run/Resume.h); steps then counts from step 0.
  bool resume = false;
  /// --stop-file: the run stops after the step in which this path
  /// appears (StopSignals.h); empty: none.
  std::string stopFile;
  std::string tracePath;    ///< Chrome trace of the last step; empty: none
  std::string logPath;      ///< --log: CSV of every step; empty: none
  std::string validatePath; ///< the dense plan to validate against
  bool poison = false;
  bool check = false;
  bool quiet = false;
  bool cudaGraph = false;   ///< --cuda-graph: replay steps as one graph
  bool shareGpus = false;   ///< --share-gpus: more ranks than GPUs
  std::string valPath;      ///< --val-data; empty: no evaluation
  int64_t evalEvery = 0;    ///< steps between evaluations (0: at the end)
  int64_t evalBatches = 16; ///< batches of the validation file per eval
  int64_t saveEvery = 0;    ///< 0: only the final --save
  int64_t keepLast = 3;     ///< rotating checkpoints kept
  bool saveInPlace = false; ///< --save-every: the step loop waits for files
  bool shuffle = false;     ///< --data's windows in a scattered order
  /// --generate IDS, once (every row continues it) or once per row: the
  /// prompts (comma-separated ids) to continue instead of training;
  /// empty: train.
  std::vector<std::vector<int32_t>> prompts;
  int64_t maxNewTokens = 32;
  int64_t warmup = 0;       ///< generations run first, unprinted and untimed
  double temperature = 0.8; ///< 0: greedy
  int64_t topK = 40;        ///< 0: the whole vocabulary
  double topP = 1.0;        ///< 1: no nucleus cut
  std::vector<int32_t> stopIds; ///< --stop-id: a row ends when it draws one
};

/// Parses and checks argv; invalid input for anything it refuses. --help
/// prints the usage and exits 0.
Result<RunFlags> parseRunFlags(int argc, char **argv);

/// Invalid input unless the folder of every file the run writes (--save
/// and its rotating files, --dump-outputs, --trace) exists and takes new
/// files, and none of them names a folder: checked before the run starts,
/// so that it never trains for hours to fail at its first save.
Status checkOutputFolders(const RunFlags &options);

} // namespace sharc
