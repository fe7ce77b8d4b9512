//===- Processes.h - the processes one run spans ----------------*- C++ -*-===//
// defines: Processes, RankSpan, singleProcess, joinProcesses
//
// One process can drive every rank of a plan (one host thread per rank);
// under mpirun the ranks are spread over P processes, each driving W / P
// consecutive ranks (one GPU per process is the usual launch, and the path
// to many nodes). Processes is what the runtime needs from the launcher:
// which process this is, where its ranks' GPUs start on the node, and three
// host-side collectives over every process: a broadcast (NCCL's unique ids,
// the loss), an all-gather of equal-sized blocks (the shards of a tensor a
// checkpoint or a comparison gathers) and a maximum (the step time). The
// collectives run on the host, outside any step; the step's own
// collectives are NCCL's. With one process they are copies.
//
//   auto processes = joinProcesses();  // MPI under mpirun, else one
//   RankSpan span = (*processes)->span(plan.worldSize());
#pragma once

#include "planner/plan/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sharc::exec {

/// The ranks [first, first + count) of a world of `world` ranks.
struct RankSpan {
  int64_t first = 0;
  int64_t count = 0;
  int64_t world = 0;
  bool holds(int64_t rank) const {
    return rank >= first && rank < first + count;
  }
};

class Processes {
public:
  virtual ~Processes() = default;
  /// This process, in [0, count()).
  virtual int64_t index() const = 0;
  virtual int64_t count() const = 0;
  /// This process's position among the processes of its node: its ranks
  /// take GPUs from localIndex() x ranks-per-process on.
  virtual int64_t localIndex() const = 0;
  /// What launched the processes ("one process", "MPI (Open MPI ...)").
  virtual std::string describe() const = 0;
  /// `numBytes` at `data` of process `root` into every other's `data`.
  virtual Status broadcast(void *data, int64_t numBytes, int64_t root) = 0;
  /// Every process's `numBytes` at `send` into `recv`, process p's at
  /// p x numBytes.
  virtual Status allGather(const void *send, void *recv, int64_t numBytes) = 0;

  /// The largest of every process's `value`.
  Result<double> max(double value);
  /// Element by element, the largest of every process's `values` (each
  /// process passes as many): several maxima in one exchange.
  Result<std::vector<double>> max(const std::vector<double> &values);
  /// The ranks this process drives: world / count() consecutive ones; a
  /// world the processes do not divide evenly is invalid input.
  Result<RankSpan> span(int64_t world) const;
  /// Output files (checkpoints, traces, reports) are written by process 0
  /// alone, after every process has taken part in the gathers.
  bool writesFiles() const { return index() == 0; }
};

/// The processes of a run launched without mpirun: this one alone.
std::shared_ptr<Processes> singleProcess();

/// Under a launcher that set Open MPI's or PMI's environment (mpirun,
/// srun): initialises MPI and returns its world; otherwise singleProcess().
/// A launch of several processes in a build without MPI is invalid input.
Result<std::shared_ptr<Processes>> joinProcesses();

} // namespace sharc::exec
