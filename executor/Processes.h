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
// collectives are NCCL's on the cuda backend. With one process they are
// copies.
//
// The cpu backend's step collectives over processes travel as messages on
// ProcessChannels (one per stream, opened at set-up by every process in the
// same order): tagged byte messages between processes that the rank
// threads send and receive at once, each under its own tags.
//
//   auto processes = joinProcesses();  // MPI under mpirun, else one
//   RankSpan span = (*processes)->span(plan.worldSize());
//   auto channel = (*processes)->openChannel();
//   SHARC_TRY((*channel)->send(/*to=*/1, /*tag=*/3, bytes));
//   auto message = (*channel)->receive(/*from=*/1, /*tag=*/3, 60.0, aborted);
#pragma once

#include "planner/plan/Status.h"

#include <atomic>
#include <cstddef>
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

/// Byte messages between the processes of a run. Any thread may call it at
/// any time; messages from one process under one tag arrive in the order
/// they were sent, and a receive takes only its own tag.
class ProcessChannel {
public:
  virtual ~ProcessChannel() = default;
  /// Queues `message` for process `to` under `tag` and returns at once,
  /// with a ticket for waitSent().
  virtual Result<uint64_t> send(int64_t to, int64_t tag,
                                std::vector<std::byte> message) = 0;
  /// Waits until the message of `ticket` has left (the receiver took it).
  /// A large MPI message moves only while its sender calls MPI, so a
  /// sender that returns to computing holds its receiver up; a collective
  /// waits for its sends before it returns.
  virtual Status waitSent(uint64_t ticket, double timeoutSeconds,
                          const std::atomic<bool> &aborted) = 0;
  /// The oldest message from process `from` under `tag`; waits at most
  /// `timeoutSeconds`, and gives up once `aborted` is set.
  virtual Result<std::vector<std::byte>>
  receive(int64_t from, int64_t tag, double timeoutSeconds,
          const std::atomic<bool> &aborted) = 0;
  /// The largest tag the channel carries (at least 32767, as MPI's).
  virtual int64_t maxTag() const = 0;
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
  /// Ends every process of the run at once with `exitCode` (MPI_Abort): a
  /// process that fails alone must not leave the others waiting in a
  /// collective it will never join. Returns where there is one process.
  virtual void abortAll(int exitCode) {}
  /// A channel of its own between every process: a collective call, made
  /// by every process in the same order, outside any step.
  virtual Result<std::unique_ptr<ProcessChannel>> openChannel() = 0;
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
