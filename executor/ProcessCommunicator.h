//===- ProcessCommunicator.h - cpu collectives over processes --*- C++ -*-===//
// defines: ProcessCommunicator
//
// The cpu backend's communicator in a run over processes (mpirun): the
// HostCommunicator's collectives with every member's input sent to every
// other member as a message on the stream's ProcessChannel. Each member then
// computes its result exactly as LocalCommunicator does in one process, so
// `mpirun -np P sharc-run PLAN --backend cpu` prints the losses and writes
// the checkpoints of one process bit for bit. A collective's message
// carries its signature, checked by every receiver; a pipeline transfer is
// a message under the plan's tag.
//
// Rank r lives in process r / L (L ranks per process, RankSpan's split); the
// channel tag names the sender's and the receiver's rank within their
// processes, so the rank threads of one process never take each other's
// messages: tag = (kind x L + sender mod L) x L + receiver mod L, kind 0 for
// a collective and 1 for a transfer. A transfer's message starts with the
// plan's tag (any 64-bit value); a recv keeps the messages of other tags
// that come first for their own recv.
//
// Every member sends every other one the part of its input that member
// reads: its piece of a reduce_scatter or an all_to_all (1/P of the
// input), the whole input of an all_reduce or an all_gather (P - 1 times
// the input in all, where a ring sends twice the input). The reference's
// exchange, for tests and for small runs that span hosts, not a fast path.
//
//   ProcessCommunicator comm(plan.mesh, rank, span.count, channel, 60.0,
//                            &aborted);
//   SHARC_TRY(comm.allReduce(x, x, DType::F32, n, ReduceOp::Sum, "dp"));
#pragma once

#include "executor/Communicator.h"
#include "executor/Processes.h"

#include <atomic>
#include <cstddef>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sharc::exec {

class ProcessCommunicator final : public HostCommunicator {
public:
  /// `channel` and `aborted` outlive the communicator; use it only from
  /// the thread of `rank` and its stream.
  ProcessCommunicator(const std::vector<plan::MeshAxis> &mesh, int64_t rank,
                      int64_t ranksPerProcess, ProcessChannel *channel,
                      double timeoutSeconds, const std::atomic<bool> *aborted);

  int64_t groupSize(const std::string &axis) const override;
  int64_t groupIndex(const std::string &axis) const override;
  bool hasGroup(const std::string &axis) const override;
  /// A send queues a copy and returns at once; a recv waits (with the
  /// timeout) for the message of its tag from `peer`.
  Status send(const void *data, int64_t numBytes, int64_t peer, int64_t tag,
              const std::string &axis) override;
  Status recv(void *data, int64_t numBytes, int64_t peer, int64_t tag,
              const std::string &axis) override;

private:
  Status runInGroup(const std::string &axis, const Call &call) override;
  enum class MessageKind { Collective = 0, Transfer = 1 };
  /// The channel tag of a message of `kind` from rank `from` to rank `to`.
  Result<int64_t> channelTag(MessageKind kind, int64_t from, int64_t to) const;
  int64_t processOf(int64_t rank) const { return rank / ranksPerProcess_; }

  std::vector<plan::MeshAxis> mesh_;
  int64_t rank_;
  int64_t ranksPerProcess_;
  ProcessChannel *channel_;
  double timeoutSeconds_;
  const std::atomic<bool> *aborted_;
  /// Axis set -> (the group's ranks, this rank's index among them).
  std::map<std::string, std::pair<std::vector<int64_t>, int64_t>> groups_;
  /// (sender rank, plan tag) -> transfers received before their recv.
  std::map<std::pair<int64_t, int64_t>, std::deque<std::vector<std::byte>>>
      stash_;
};

} // namespace sharc::exec
