//===- Communicator.h - collectives: the interface, in-process --*- C++ -*-===//
// defines: ReduceOp, Communicator, MeshGroup, meshGroups, HostCommunicator,
//          CommWorld, LocalCommunicator
//
// Communicator is what an instruction calls; a backend supplies one per rank
// and stream (LocalCommunicator here for the cpu backend, ProcessCommunicator
// for the cpu backend over processes, NCCL's for cuda in executor/cuda).
// Buffers are the backend's: host memory here, device memory there, where the
// call is enqueued on the stream the communicator was made for and returns
// before the data moved.
//
// HostCommunicator: the cpu's collectives, each member computing its own
// result from every member's input in rank order (so sums are reproducible
// bit for bit, and the same however the inputs met). The groups are
// meshGroups(): ranks that share every mesh coordinate but one (the
// sub-communicator of that axis), one per set of axes ("dp,tp": those
// sharing the other coordinates), plus "world" for all ranks.
//
// LocalCommunicator: one thread per rank; a CommWorld holds one rendezvous per
// group. A collective is two generation-counted barriers: members publish
// their send pointers, each computes its result, and after the second
// barrier it writes it (the result may alias its input). Every wait times
// out into a Status
// naming the collective; a failing rank calls abort() so the others stop
// waiting at once. Point-to-point messages queue in a mailbox per (sender,
// receiver, tag): sends never wait and a recv takes its own tag, so two
// stages may list their transfers in any order.
//
//   CommWorld world(plan.mesh, /*timeoutSeconds=*/60);
//   LocalCommunicator comm = world.communicator(rank); // on rank's thread
//   SHARC_TRY(comm.allReduce(x, x, DType::F32, n, ReduceOp::Sum, "tp"));
//   SHARC_TRY(comm.allGather(in, out, DType::BF16, {s, b, h}, 0, "tp"));
//   SHARC_TRY(comm.allToAll(in, out, DType::F32, {s, b, h}, 2, 0, "cp"));
//   SHARC_TRY(comm.send(x, numBytes, /*peer=*/1, /*tag=*/7, "pp")); // 0
//   SHARC_TRY(comm.recv(x, numBytes, /*peer=*/0, /*tag=*/7, "pp")); // 1
#pragma once

#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace sharc::exec {

enum class ReduceOp { Sum, Max };

class Communicator {
public:
  virtual ~Communicator() = default;
  /// Number of ranks in the group of `axis` ("world": all ranks); an axis
  /// the mesh lacks is a group of one, as Plan::axisSize says.
  virtual int64_t groupSize(const std::string &axis) const = 0;
  virtual int64_t groupIndex(const std::string &axis) const = 0;
  /// Whether the communicator has one group for `axis`. A reduction over
  /// several axes ("dp,tp") without one runs as one reduction per axis
  /// (the sum is the same), which is what a backend gets by default.
  virtual bool hasGroup(const std::string &axis) const {
    return axis.find(',') == std::string::npos;
  }

  /// out = elementwise reduction over the group's `numel`-element inputs.
  virtual Status allReduce(const void *send, void *recv, DType dtype,
                           int64_t numel, ReduceOp op,
                           const std::string &axis) = 0;
  /// out: sendShape with dim `dim` multiplied by the group size, the
  /// members' inputs concatenated along it in group order.
  virtual Status allGather(const void *send, void *recv, DType dtype,
                           const std::vector<int64_t> &sendShape, int64_t dim,
                           const std::string &axis) = 0;
  /// out: the summed input's piece `groupIndex` along `dim` (sendShape's
  /// dim divided by the group size).
  virtual Status reduceScatter(const void *send, void *recv, DType dtype,
                               const std::vector<int64_t> &sendShape,
                               int64_t dim, const std::string &axis) = 0;
  /// out: sendShape with dim `splitDim` divided by and dim `concatDim`
  /// multiplied by the group size; piece j (along splitDim) of member m's
  /// input lands in member j's output as block m along concatDim.
  /// Backends without it refuse at run time.
  virtual Status allToAll(const void *send, void *recv, DType dtype,
                          const std::vector<int64_t> &sendShape,
                          int64_t splitDim, int64_t concatDim,
                          const std::string &axis) {
    return Status::runtimeError("all_to_all over " + axis +
                                " is not implemented on this backend");
  }
  /// Point to point over `axis` (pipeline stages): `numBytes` to (or from)
  /// the member with index `peer` in this rank's group of `axis`. A recv
  /// gets the send of its `tag` where the backend matches tags (the cpu's),
  /// else the n-th recv from a peer gets the n-th send to it (NCCL's).
  /// Backends without it refuse.
  virtual Status send(const void *data, int64_t numBytes, int64_t peer,
                      int64_t tag, const std::string &axis) {
    return Status::runtimeError("send over " + axis +
                                " is not implemented on this backend");
  }
  virtual Status recv(void *data, int64_t numBytes, int64_t peer, int64_t tag,
                      const std::string &axis) {
    return Status::runtimeError("recv over " + axis +
                                " is not implemented on this backend");
  }
  /// Brackets sends and recvs that must be posted together (NCCL's group:
  /// two ranks sending to each other at once would otherwise wait for
  /// each other). No-ops where sends never wait (the cpu's).
  virtual Status beginTransfers() { return Status::ok(); }
  virtual Status endTransfers() { return Status::ok(); }
};

/// "f32[2,3]": a collective's operand in its signature and messages.
std::string collectiveShapeText(DType dtype, const std::vector<int64_t> &shape);

/// The ranks of one group: `axes` is "world", one axis or a comma-joined
/// set in mesh order; `ranks` in rank order (for one axis, its coordinate
/// order).
struct MeshGroup {
  std::string axes;
  std::vector<int64_t> ranks;
};
/// Every group of the mesh: "world", then each nonempty set of axes.
std::vector<MeshGroup> meshGroups(const std::vector<plan::MeshAxis> &mesh);
/// The global rank of member `peer` of `rank`'s group of `axis` (one
/// mesh axis: pipeline stages' point-to-point transfers).
Result<int64_t> meshPeerRank(const std::vector<plan::MeshAxis> &mesh,
                             int64_t rank, int64_t peer,
                             const std::string &axis);

/// The cpu's collectives over host memory. How the members' inputs meet is
/// the derived class's run(); what each computes from them is here.
class HostCommunicator : public Communicator {
public:
  Status allReduce(const void *send, void *recv, DType dtype, int64_t numel,
                   ReduceOp op, const std::string &axis) override;
  Status allGather(const void *send, void *recv, DType dtype,
                   const std::vector<int64_t> &sendShape, int64_t dim,
                   const std::string &axis) override;
  Status reduceScatter(const void *send, void *recv, DType dtype,
                       const std::vector<int64_t> &sendShape, int64_t dim,
                       const std::string &axis) override;
  Status allToAll(const void *send, void *recv, DType dtype,
                  const std::vector<int64_t> &sendShape, int64_t splitDim,
                  int64_t concatDim, const std::string &axis) override;
  Status barrier(const std::string &axis);

protected:
  /// `count` runs of `length` bytes, `stride` apart from `offset`.
  struct InputPiece {
    int64_t count = 1, stride = 0, offset = 0, length = 0;
    int64_t bytes() const { return count * length; }
  };
  /// One collective as a member sees it.
  struct Call {
    const char *name;      ///< "all_reduce", for messages
    std::string signature; ///< what every member must agree on
    const void *send;
    int64_t sendBytes;
    void *recv;
    int64_t recvBytes;
    /// Writes this member's result from every member's input.
    std::function<void(const std::vector<const void *> &sends, int64_t index,
                       std::byte *out)>
        compute;
    /// The bytes of a member's input that member `reader` reads (its piece
    /// of a reduce_scatter or an all_to_all); empty: all of them. A
    /// communicator that moves inputs between processes sends only these.
    std::function<InputPiece(int64_t reader)> pieceFor;
  };
  /// Runs `call` for this member: computed alone where its group of `axis`
  /// is one rank (or the mesh has no such axis), else runInGroup().
  Status run(const std::string &axis, const Call &call);
  /// Brings every member's input of a group of two or more to
  /// `call.compute` and writes the result to `call.recv` once no member
  /// reads this one's input any more.
  virtual Status runInGroup(const std::string &axis, const Call &call) = 0;
};

class LocalCommunicator;

class CommWorld {
public:
  CommWorld(std::vector<plan::MeshAxis> mesh, double timeoutSeconds = 60.0);
  ~CommWorld();
  CommWorld(const CommWorld &) = delete;
  CommWorld &operator=(const CommWorld &) = delete;

  int64_t worldSize() const { return worldSize_; }
  /// The view of one rank; use it only from that rank's thread.
  LocalCommunicator communicator(int64_t rank);
  /// Wakes every waiting rank with an error; stays aborted until reset().
  void abort();
  /// Clears an abort; only while no rank is inside a collective.
  void reset();
  bool isAborted() const { return aborted_.load(); }

  struct Group;   ///< one rendezvous, opaque outside Communicator.cpp
  struct Mailbox; ///< queued point-to-point messages

private:
  friend class LocalCommunicator;
  std::vector<plan::MeshAxis> mesh_;
  int64_t worldSize_ = 1;
  double timeoutSeconds_;
  std::atomic<bool> aborted_{false};
  std::vector<std::unique_ptr<Group>> groups_;
  std::unique_ptr<Mailbox> mailbox_;
  /// For each rank: axis name -> (group, index of the rank in it).
  std::vector<std::map<std::string, std::pair<Group *, int64_t>>> membership_;
};

class LocalCommunicator final : public HostCommunicator {
public:
  int64_t rank() const { return rank_; }
  int64_t groupSize(const std::string &axis) const override;
  int64_t groupIndex(const std::string &axis) const override;
  bool hasGroup(const std::string &axis) const override;
  /// A send copies into the receiver's mailbox and returns at once; a recv
  /// waits (with the world's timeout) for the message of its tag from
  /// `peer` (the oldest, if one tag is sent several times).
  Status send(const void *data, int64_t numBytes, int64_t peer, int64_t tag,
              const std::string &axis) override;
  Status recv(void *data, int64_t numBytes, int64_t peer, int64_t tag,
              const std::string &axis) override;

private:
  friend class CommWorld;
  LocalCommunicator(CommWorld *world, int64_t rank)
      : world_(world), rank_(rank) {}
  Status runInGroup(const std::string &axis, const Call &call) override;

  CommWorld *world_;
  int64_t rank_;
};

} // namespace sharc::exec
