//===- NcclCommunicator.cpp - collectives of one rank and stream ----------===//

#include "executor/cuda/NcclCommunicator.h"

#include "executor/CollectiveLayout.h"
#include "executor/ShardLayout.h"
#include "kernels/Copy.h"
#include "kernels/cuda/Launch.h"

#include <nccl.h>

#include <algorithm>
#include <cstddef>

namespace sharc::exec {

namespace {

Status ncclStatus(ncclResult_t result, const char *call) {
  if (result == ncclSuccess)
    return Status::ok();
  return Status::runtimeError(std::string("NCCL: ") + call + ": " +
                              ncclGetErrorString(result));
}

#define SHARC_NCCL(call)                                                       \
  do {                                                                         \
    ::sharc::Status sharcNcclStatus = ncclStatus((call), #call);               \
    if (!sharcNcclStatus.isOk())                                               \
      return sharcNcclStatus;                                                  \
  } while (0)

Result<ncclDataType_t> ncclType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return ncclFloat32;
  case DType::BF16:
    return ncclBfloat16;
  case DType::I32:
    return ncclInt32;
  case DType::F64:
    return ncclFloat64;
  }
  return Status::invalidInput("no NCCL type for this dtype");
}

cudaStream_t asStream(void *stream) {
  return static_cast<cudaStream_t>(stream);
}

} // namespace

std::vector<size_t> NcclGroups::axesOf(const std::string &key) const {
  std::vector<size_t> axes;
  for (size_t start = 0; start <= key.size();) {
    size_t end = std::min(key.find(',', start), key.size());
    std::string name = key.substr(start, end - start);
    for (size_t a = 0; a < mesh_.size(); ++a)
      if (mesh_[a].name == name)
        axes.push_back(a);
    start = end + 1;
  }
  return axes;
}

Result<std::unique_ptr<NcclGroups>>
NcclGroups::create(const std::vector<plan::MeshAxis> &mesh, int64_t numStreams,
                   const RankSpan &span, int64_t firstDevice,
                   Processes &processes,
                   const std::vector<std::string> &multiAxisKeys) {
  std::unique_ptr<NcclGroups> groups(new NcclGroups());
  groups->mesh_ = mesh;
  int64_t worldSize = 1;
  for (const plan::MeshAxis &axis : mesh)
    worldSize *= axis.size;
  // Every axis of the mesh, then the sets of axes the plan reduces over
  // at once ("dp,tp"): one group each, its members ranked by their
  // coordinates along the key's axes, the first outermost.
  std::vector<std::string> keys;
  for (const plan::MeshAxis &axis : mesh)
    keys.push_back(axis.name);
  for (const std::string &key : multiAxisKeys)
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      keys.push_back(key);
  // Every group of every (stream, axis), in an order all processes agree
  // on: the ranks that share every other coordinate, by their coordinate
  // along the axis.
  struct Group {
    int64_t stream;
    std::string axis;
    std::vector<int64_t> ranks;
  };
  std::vector<Group> all;
  groups->members_.resize(static_cast<size_t>(numStreams));
  for (int64_t s = 0; s < numStreams; ++s) {
    for (const std::string &key : keys) {
      std::vector<size_t> axes = groups->axesOf(key);
      int64_t size = groups->groupSize(key);
      if (size <= 1 || axes.empty())
        continue;
      auto &members = groups->members_[s][key];
      members.resize(static_cast<size_t>(worldSize));
      std::map<std::vector<int64_t>, std::vector<int64_t>> byRest;
      for (int64_t r = 0; r < worldSize; ++r) {
        std::vector<int64_t> rest = meshCoords(mesh, r);
        int64_t index = 0;
        for (size_t a : axes) {
          index = index * mesh[a].size + rest[a];
          rest[a] = 0;
        }
        auto &ranks = byRest[rest];
        ranks.resize(static_cast<size_t>(size));
        ranks[index] = r;
        members[r].index = index;
      }
      for (auto &[rest, ranks] : byRest)
        all.push_back({s, key, ranks});
    }
  }
  // One unique id per group, made by the first process and shared with the
  // others (as nccl-tests does over MPI); one process makes and keeps them.
  std::vector<ncclUniqueId> ids(all.size());
  if (processes.index() == 0)
    for (ncclUniqueId &id : ids)
      SHARC_NCCL(ncclGetUniqueId(&id));
  SHARC_TRY(processes.broadcast(
      ids.data(), static_cast<int64_t>(ids.size() * sizeof(ncclUniqueId)), 0));
  // Each group's members this process drives join it together: several
  // ranks of one process must init inside one NCCL group call.
  for (size_t g = 0; g < all.size(); ++g) {
    const Group &group = all[g];
    auto &members = groups->members_[group.stream][group.axis];
    SHARC_NCCL(ncclGroupStart());
    Status status = Status::ok();
    for (size_t i = 0; i < group.ranks.size() && status; ++i) {
      int64_t rank = group.ranks[i];
      if (!span.holds(rank))
        continue;
      if (cudaSetDevice(static_cast<int>(firstDevice + rank - span.first)) !=
          cudaSuccess)
        status = Status::runtimeError("cudaSetDevice failed for rank " +
                                      std::to_string(rank));
      else
        status =
            ncclStatus(ncclCommInitRank(&members[rank].comm,
                                        static_cast<int>(group.ranks.size()),
                                        ids[g], static_cast<int>(i)),
                       "ncclCommInitRank");
    }
    SHARC_NCCL(ncclGroupEnd());
    SHARC_TRY(status.withContext("the " + group.axis + " group of stream " +
                                 std::to_string(group.stream)));
  }
  return groups;
}

NcclGroups::~NcclGroups() {
  for (auto &axes : members_)
    for (auto &[name, members] : axes)
      for (Member &member : members)
        if (member.comm) {
          if (aborted_)
            ncclCommAbort(member.comm);
          else
            ncclCommDestroy(member.comm);
        }
}

ncclComm_t NcclGroups::comm(int64_t rank, int64_t stream,
                            const std::string &axis) const {
  auto it = members_[stream].find(axis);
  return it == members_[stream].end() ? nullptr : it->second[rank].comm;
}

int64_t NcclGroups::groupSize(const std::string &axis) const {
  int64_t size = 1;
  for (size_t a : axesOf(axis))
    size *= mesh_[a].size;
  return size;
}

bool NcclGroups::hasGroup(const std::string &axis) const {
  if (axis.find(',') == std::string::npos || groupSize(axis) <= 1)
    return true;
  return !members_.empty() && members_[0].count(axis) > 0;
}

int64_t NcclGroups::groupIndex(int64_t rank, const std::string &axis) const {
  for (const auto &axes : members_) {
    auto it = axes.find(axis);
    if (it != axes.end())
      return it->second[rank].index;
  }
  return 0;
}

void NcclGroups::abortAll() {
  if (aborted_)
    return;
  aborted_ = true;
  for (auto &axes : members_)
    for (auto &[name, members] : axes)
      for (Member &member : members)
        if (member.comm) {
          ncclCommAbort(member.comm);
          member.comm = nullptr;
        }
}

Status NcclGroups::asyncError(int64_t rank) const {
  for (const auto &axes : members_)
    for (const auto &[name, members] : axes) {
      ncclComm_t comm = members[rank].comm;
      if (!comm)
        continue;
      ncclResult_t error = ncclSuccess;
      SHARC_NCCL(ncclCommGetAsyncError(comm, &error));
      if (error != ncclSuccess && error != ncclInProgress)
        return Status::runtimeError("NCCL communicator of axis " + name + ": " +
                                    ncclGetErrorString(error));
    }
  return Status::ok();
}

int64_t NcclCommunicator::groupSize(const std::string &axis) const {
  return groups_.groupSize(axis);
}

int64_t NcclCommunicator::groupIndex(const std::string &axis) const {
  return groups_.groupIndex(rank_, axis);
}

bool NcclCommunicator::hasGroup(const std::string &axis) const {
  return groups_.hasGroup(axis);
}

Status NcclCommunicator::allReduce(const void *send, void *recv, DType dtype,
                                   int64_t numel, ReduceOp op,
                                   const std::string &axis) {
  if (groups_.aborted())
    return Status::runtimeError("NCCL was aborted after an earlier failure");
  ncclComm_t comm = groups_.comm(rank_, stream_, axis);
  if (!comm)
    return kernels::cuda::copy2d({.src = send,
                                  .dst = recv,
                                  .rows = 1,
                                  .rowBytes = numel * dtypeSize(dtype),
                                  .srcPitch = numel * dtypeSize(dtype),
                                  .dstPitch = numel * dtypeSize(dtype)},
                                 asStream(cudaStream_));
  auto type = ncclType(dtype);
  if (!type)
    return type.status();
  SHARC_NCCL(ncclAllReduce(send, recv, static_cast<size_t>(numel), *type,
                           op == ReduceOp::Sum ? ncclSum : ncclMax, comm,
                           asStream(cudaStream_)));
  return Status::ok();
}

Status NcclCommunicator::send(const void *data, int64_t numBytes, int64_t peer,
                              int64_t tag, const std::string &axis) {
  if (groups_.aborted())
    return Status::runtimeError("NCCL was aborted after an earlier failure");
  ncclComm_t comm = groups_.comm(rank_, stream_, axis);
  if (!comm)
    return Status::runtimeError("send over " + axis + ": no communicator");
  SHARC_NCCL(ncclSend(data, static_cast<size_t>(numBytes), ncclUint8,
                      static_cast<int>(peer), comm, asStream(cudaStream_)));
  return Status::ok();
}

Status NcclCommunicator::beginTransfers() {
  SHARC_NCCL(ncclGroupStart());
  return Status::ok();
}

Status NcclCommunicator::endTransfers() {
  SHARC_NCCL(ncclGroupEnd());
  return Status::ok();
}

Status NcclCommunicator::recv(void *data, int64_t numBytes, int64_t peer,
                              int64_t tag, const std::string &axis) {
  if (groups_.aborted())
    return Status::runtimeError("NCCL was aborted after an earlier failure");
  ncclComm_t comm = groups_.comm(rank_, stream_, axis);
  if (!comm)
    return Status::runtimeError("recv over " + axis + ": no communicator");
  SHARC_NCCL(ncclRecv(data, static_cast<size_t>(numBytes), ncclUint8,
                      static_cast<int>(peer), comm, asStream(cudaStream_)));
  return Status::ok();
}

Status NcclCommunicator::allGather(const void *send, void *recv, DType dtype,
                                   const std::vector<int64_t> &sendShape,
                                   int64_t dim, const std::string &axis) {
  if (groups_.aborted())
    return Status::runtimeError("NCCL was aborted after an earlier failure");
  int64_t elementBytes = dtypeSize(dtype);
  int64_t sendBytes = numElements(sendShape) * elementBytes;
  int64_t members = groupSize(axis);
  ncclComm_t comm = groups_.comm(rank_, stream_, axis);
  if (!comm)
    return allReduce(send, recv, dtype, numElements(sendShape), ReduceOp::Sum,
                     axis);
  auto type = ncclType(dtype);
  if (!type)
    return type.status();
  DimSplit split = splitAt(sendShape, dim, elementBytes);
  cudaStream_t stream = asStream(cudaStream_);
  if (split.outer == 1) {
    SHARC_NCCL(ncclAllGather(send, recv,
                             static_cast<size_t>(numElements(sendShape)), *type,
                             comm, stream));
    return Status::ok();
  }
  if (sendBytes * members > stagingBytes_)
    return Status::runtimeError(
        "all_gather staging of " + std::to_string(stagingBytes_) +
        " bytes is short of " + std::to_string(sendBytes * members));
  // Member j's block lands at staging + j * sendBytes; each of its outer
  // rows then moves to column block j of the output's row.
  SHARC_NCCL(ncclAllGather(send, staging_,
                           static_cast<size_t>(numElements(sendShape)), *type,
                           comm, stream));
  int64_t rowBytes = split.extent * split.innerBytes;
  for (int64_t j = 0; j < members; ++j)
    SHARC_TRY(kernels::cuda::copy2d(
        {.src = static_cast<const std::byte *>(staging_) + j * sendBytes,
         .dst = static_cast<std::byte *>(recv) + j * rowBytes,
         .rows = split.outer,
         .rowBytes = rowBytes,
         .srcPitch = rowBytes,
         .dstPitch = rowBytes * members},
        stream));
  return Status::ok();
}

Status NcclCommunicator::reduceScatter(const void *send, void *recv,
                                       DType dtype,
                                       const std::vector<int64_t> &sendShape,
                                       int64_t dim, const std::string &axis) {
  if (groups_.aborted())
    return Status::runtimeError("NCCL was aborted after an earlier failure");
  int64_t elementBytes = dtypeSize(dtype);
  int64_t sendBytes = numElements(sendShape) * elementBytes;
  int64_t members = groupSize(axis);
  ncclComm_t comm = groups_.comm(rank_, stream_, axis);
  if (!comm)
    return allReduce(send, recv, dtype, numElements(sendShape), ReduceOp::Sum,
                     axis);
  auto type = ncclType(dtype);
  if (!type)
    return type.status();
  size_t recvCount = static_cast<size_t>(numElements(sendShape) / members);
  DimSplit split = splitAt(sendShape, dim, elementBytes);
  cudaStream_t stream = asStream(cudaStream_);
  if (split.outer == 1) {
    SHARC_NCCL(
        ncclReduceScatter(send, recv, recvCount, *type, ncclSum, comm, stream));
    return Status::ok();
  }
  if (sendBytes > stagingBytes_)
    return Status::runtimeError(
        "reduce_scatter staging of " + std::to_string(stagingBytes_) +
        " bytes is short of " + std::to_string(sendBytes));
  // Pack column block j of every outer row into block j of the staging
  // buffer, so that NCCL's block j is member j's piece.
  int64_t blockRowBytes = split.extent / members * split.innerBytes;
  int64_t blockBytes = sendBytes / members;
  for (int64_t j = 0; j < members; ++j)
    SHARC_TRY(kernels::cuda::copy2d(
        {.src = static_cast<const std::byte *>(send) + j * blockRowBytes,
         .dst = static_cast<std::byte *>(staging_) + j * blockBytes,
         .rows = split.outer,
         .rowBytes = blockRowBytes,
         .srcPitch = split.extent * split.innerBytes,
         .dstPitch = blockRowBytes},
        stream));
  SHARC_NCCL(ncclReduceScatter(staging_, recv, recvCount, *type, ncclSum, comm,
                               stream));
  return Status::ok();
}

Status NcclCommunicator::allToAll(const void *send, void *recv, DType dtype,
                                  const std::vector<int64_t> &sendShape,
                                  int64_t splitDim, int64_t concatDim,
                                  const std::string &axis) {
  if (groups_.aborted())
    return Status::runtimeError("NCCL was aborted after an earlier failure");
  int64_t members = groupSize(axis);
  int64_t elementBytes = dtypeSize(dtype);
  auto layout = allToAllLayout(sendShape, splitDim, concatDim, members,
                               elementBytes, axis);
  if (!layout)
    return layout.status();
  int64_t numel = numElements(sendShape);
  int64_t sendBytes = layout->sendBytes, pieceBytes = layout->pieceBytes;
  ncclComm_t comm = groups_.comm(rank_, stream_, axis);
  if (!comm) // a group of one: its only piece is the whole input
    return allReduce(send, recv, dtype, numel, ReduceOp::Sum, axis);
  auto type = ncclType(dtype);
  if (!type)
    return type.status();
  // Pieces go out and come in whole: packed from strided rows unless the
  // split dimension is the outermost, unpacked into strided rows unless
  // the concatenated one is.
  int64_t needed = (layout->piecesStrided() ? sendBytes : 0) +
                   (layout->blocksStrided() ? sendBytes : 0);
  if (needed > stagingBytes_)
    return Status::runtimeError("all_to_all staging of " +
                                std::to_string(stagingBytes_) +
                                " bytes is short of " + std::to_string(needed));
  cudaStream_t stream = asStream(cudaStream_);
  auto *sendStage = static_cast<std::byte *>(staging_);
  std::byte *recvStage = sendStage + (layout->piecesStrided() ? sendBytes : 0);
  const auto *sendFrom = static_cast<const std::byte *>(send);
  auto *recvInto = static_cast<std::byte *>(recv);
  if (layout->piecesStrided()) {
    for (int64_t j = 0; j < members; ++j)
      SHARC_TRY(kernels::cuda::copy2d(
          layout->packPiece(send, j, sendStage + j * pieceBytes), stream));
    sendFrom = sendStage;
  }
  if (layout->blocksStrided())
    recvInto = recvStage;
  auto count = static_cast<size_t>(numel / members);
  SHARC_NCCL(ncclGroupStart());
  Status status = Status::ok();
  for (int64_t j = 0; j < members && status; ++j) {
    status = ncclStatus(ncclSend(sendFrom + j * pieceBytes, count, *type,
                                 static_cast<int>(j), comm, stream),
                        "ncclSend");
    if (status)
      status = ncclStatus(ncclRecv(recvInto + j * pieceBytes, count, *type,
                                   static_cast<int>(j), comm, stream),
                          "ncclRecv");
  }
  SHARC_NCCL(ncclGroupEnd());
  SHARC_TRY(status);
  if (layout->blocksStrided())
    for (int64_t m = 0; m < members; ++m)
      SHARC_TRY(kernels::cuda::copy2d(
          layout->placeBlock(recvStage + m * pieceBytes, m, recv), stream));
  return Status::ok();
}

} // namespace sharc::exec
