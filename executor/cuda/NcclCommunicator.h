//===- NcclCommunicator.h - collectives of one rank and stream --*- C++ -*-===//
// defines: NcclGroups, NcclCommunicator
//
// NcclGroups makes the NCCL communicators of the ranks one process drives:
// for each stream and each mesh axis, one communicator per group of ranks
// that share every other coordinate, initialised from a unique id the
// first process makes and shares with the others (Processes.h), so that a
// group may span processes (mpirun) as well as GPUs of one process. Each stream
// has its own, so the collectives of two streams never queue behind each other
// inside NCCL. NcclCommunicator is the Communicator of one (rank, stream):
// every call is enqueued on that stream and returns at once. A gather or
// scatter along an inner dimension goes through a staging buffer sized at
// set-up, since NCCL concatenates along the outermost one.
//
//   auto groups = NcclGroups::create(plan.mesh, plan.numStreams, span,
//                                    firstDevice, processes);
//   NcclCommunicator comm(*groups, rank, stream, cudaStream, staging, bytes);
//   SHARC_TRY(comm.allReduce(x, x, DType::BF16, n, ReduceOp::Sum, "tp"));
#pragma once

#include "executor/Communicator.h"
#include "executor/Processes.h"
#include "planner/plan/Plan.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

typedef struct ncclComm *ncclComm_t;

namespace sharc::exec {

class NcclGroups {
public:
  /// The communicators of the ranks in `span`, rank r on GPU firstDevice
  /// + r - span.first; every process of the run must call it.
  /// `multiAxisKeys`: the sets of axes ("dp,tp") the plan's collectives
  /// name at once; each gets its own group beside the mesh's axes.
  static Result<std::unique_ptr<NcclGroups>>
  create(const std::vector<plan::MeshAxis> &mesh, int64_t numStreams,
         const RankSpan &span, int64_t firstDevice, Processes &processes,
         const std::vector<std::string> &multiAxisKeys = {});
  ~NcclGroups();

  /// The communicator of `axis` for (rank, stream); null for an axis of
  /// size 1, one the mesh lacks, or a rank another process drives.
  ncclComm_t comm(int64_t rank, int64_t stream, const std::string &axis) const;
  /// `axis` is one axis or a comma-separated set of them.
  int64_t groupSize(const std::string &axis) const;
  int64_t groupIndex(int64_t rank, const std::string &axis) const;
  /// Whether a set of axes has a group of its own (create's keys).
  bool hasGroup(const std::string &axis) const;
  /// Aborts every communicator (a collective that never finishes); the
  /// groups are unusable afterwards.
  void abortAll();
  bool aborted() const { return aborted_; }
  /// The first asynchronous NCCL error of any communicator of `rank`.
  Status asyncError(int64_t rank) const;

private:
  NcclGroups() = default;
  /// The mesh positions of a key's axes, in the key's order.
  std::vector<size_t> axesOf(const std::string &key) const;
  struct Member {
    ncclComm_t comm = nullptr;
    int64_t index = 0;
  };
  std::vector<plan::MeshAxis> mesh_;
  /// [stream][axis name][rank]
  std::vector<std::map<std::string, std::vector<Member>>> members_;
  bool aborted_ = false;
};

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(const NcclGroups &groups, int64_t rank, int64_t stream,
                   void *cudaStream, void *staging, int64_t stagingBytes)
      : groups_(groups), rank_(rank), stream_(stream), cudaStream_(cudaStream),
        staging_(staging), stagingBytes_(stagingBytes) {}

  int64_t groupSize(const std::string &axis) const override;
  int64_t groupIndex(const std::string &axis) const override;
  bool hasGroup(const std::string &axis) const override;
  Status allReduce(const void *send, void *recv, DType dtype, int64_t numel,
                   ReduceOp op, const std::string &axis) override;
  Status allGather(const void *send, void *recv, DType dtype,
                   const std::vector<int64_t> &sendShape, int64_t dim,
                   const std::string &axis) override;
  Status reduceScatter(const void *send, void *recv, DType dtype,
                       const std::vector<int64_t> &sendShape, int64_t dim,
                       const std::string &axis) override;

  /// One ncclSend/ncclRecv per member inside one NCCL group, each piece
  /// packed into and unpacked from the staging buffer (2 x the input's
  /// bytes) unless the split or concatenated dimension is the outermost.
  Status allToAll(const void *send, void *recv, DType dtype,
                  const std::vector<int64_t> &sendShape, int64_t splitDim,
                  int64_t concatDim, const std::string &axis) override;

  /// ncclSend / ncclRecv of raw bytes to the axis communicator's rank
  /// `peer`, enqueued on this stream. NCCL has no tags: sends and recvs
  /// between two ranks match in order. Its point to point waits for its
  /// partner, so the stages' transfer orders must pair up (1F1B's
  /// send_forward + recv_backward pairs would want one NCCL group).
  Status send(const void *data, int64_t numBytes, int64_t peer, int64_t tag,
              const std::string &axis) override;
  Status recv(void *data, int64_t numBytes, int64_t peer, int64_t tag,
              const std::string &axis) override;
  /// ncclGroupStart / ncclGroupEnd around adjacent sends and recvs.
  Status beginTransfers() override;
  Status endTransfers() override;

private:
  const NcclGroups &groups_;
  int64_t rank_, stream_;
  void *cudaStream_;
  void *staging_;
  int64_t stagingBytes_;
};

} // namespace sharc::exec
