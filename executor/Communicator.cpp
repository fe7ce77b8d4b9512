//===- Communicator.cpp - the cpu's collectives, met in one process -------===//

#include "executor/Communicator.h"

#include "executor/Deadline.h"
#include "executor/OpTable.h"
#include "executor/ShardLayout.h"
#include "kernels/TensorView.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <tuple>

namespace sharc::exec {

struct CommWorld::Group {
  std::string axis;
  int64_t size = 1;
  std::mutex mutex;
  std::condition_variable wakeUp;
  uint64_t generation = 0;
  int64_t arrived = 0;
  std::vector<const void *> sends;
  std::vector<std::string> signatures;
};

struct CommWorld::Mailbox {
  std::mutex mutex;
  std::condition_variable arrived;
  /// (sender, receiver, tag) -> messages in send order.
  std::map<std::tuple<int64_t, int64_t, int64_t>,
           std::deque<std::vector<std::byte>>>
      queues;
};

CommWorld::CommWorld(std::vector<plan::MeshAxis> mesh, double timeoutSeconds)
    : mesh_(std::move(mesh)), timeoutSeconds_(timeoutSeconds),
      mailbox_(std::make_unique<Mailbox>()) {
  for (const plan::MeshAxis &axis : mesh_)
    worldSize_ *= axis.size;
  membership_.resize(worldSize_);
  for (MeshGroup &members : meshGroups(mesh_)) {
    auto group = std::make_unique<Group>();
    group->axis = members.axes;
    group->size = static_cast<int64_t>(members.ranks.size());
    group->sends.resize(members.ranks.size());
    group->signatures.resize(members.ranks.size());
    for (size_t i = 0; i < members.ranks.size(); ++i)
      membership_[members.ranks[i]][members.axes] = {group.get(),
                                                     static_cast<int64_t>(i)};
    groups_.push_back(std::move(group));
  }
}

std::vector<MeshGroup> meshGroups(const std::vector<plan::MeshAxis> &mesh) {
  int64_t worldSize = 1;
  for (const plan::MeshAxis &axis : mesh)
    worldSize *= axis.size;
  std::vector<MeshGroup> groups;
  MeshGroup everyone{"world", {}};
  for (int64_t r = 0; r < worldSize; ++r)
    everyone.ranks.push_back(r);
  groups.push_back(std::move(everyone));
  // The group of a set of axes (one axis, or "dp,tp" for a reduction over
  // several at once): ranks whose coordinates agree off those axes, in
  // rank order (for one axis, its coordinate order).
  size_t numAxes = mesh.size();
  for (uint64_t subset = 1; subset < (uint64_t{1} << numAxes); ++subset) {
    std::string name;
    for (size_t a = 0; a < numAxes; ++a)
      if (subset >> a & 1)
        name += (name.empty() ? "" : ",") + mesh[a].name;
    std::map<std::vector<int64_t>, std::vector<int64_t>> groupOf;
    for (int64_t r = 0; r < worldSize; ++r) {
      std::vector<int64_t> key = meshCoords(mesh, r);
      for (size_t a = 0; a < numAxes; ++a)
        if (subset >> a & 1)
          key[a] = 0;
      groupOf[key].push_back(r);
    }
    for (auto &[key, ranks] : groupOf)
      groups.push_back(MeshGroup{name, std::move(ranks)});
  }
  return groups;
}

CommWorld::~CommWorld() = default;

LocalCommunicator CommWorld::communicator(int64_t rank) {
  return LocalCommunicator(this, rank);
}

void CommWorld::abort() {
  aborted_.store(true);
  {
    std::lock_guard<std::mutex> lock(mailbox_->mutex);
    mailbox_->arrived.notify_all();
  }
  for (auto &group : groups_) {
    std::lock_guard<std::mutex> lock(group->mutex);
    group->wakeUp.notify_all();
  }
}

void CommWorld::reset() {
  {
    std::lock_guard<std::mutex> lock(mailbox_->mutex);
    mailbox_->queues.clear();
  }
  for (auto &group : groups_) {
    std::lock_guard<std::mutex> lock(group->mutex);
    group->arrived = 0;
    ++group->generation;
  }
  aborted_.store(false);
}

int64_t LocalCommunicator::groupSize(const std::string &axis) const {
  const auto &groups = world_->membership_[rank_];
  auto it = groups.find(axis);
  return it == groups.end() ? 1 : it->second.first->size;
}

bool LocalCommunicator::hasGroup(const std::string &axis) const {
  return world_->membership_[rank_].count(axis) > 0;
}

int64_t LocalCommunicator::groupIndex(const std::string &axis) const {
  const auto &groups = world_->membership_[rank_];
  auto it = groups.find(axis);
  return it == groups.end() ? 0 : it->second.second;
}

namespace {

/// Waits until every member of the group has arrived at this barrier.
Status arriveAndWait(CommWorld::Group &group,
                     std::unique_lock<std::mutex> &lock,
                     const std::atomic<bool> &aborted, double timeoutSeconds,
                     const std::string &what) {
  uint64_t generation = group.generation;
  if (++group.arrived == group.size) {
    group.arrived = 0;
    ++group.generation;
    group.wakeUp.notify_all();
    return Status::ok();
  }
  auto deadline = deadlineAfter(timeoutSeconds);
  while (group.generation == generation) {
    if (aborted.load())
      return Status::runtimeError(what + ": aborted, another rank failed");
    if (group.wakeUp.wait_until(lock, deadline) == std::cv_status::timeout &&
        group.generation == generation) {
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%g", timeoutSeconds);
      return Status::runtimeError(
          what + ": timed out after " + seconds + " s waiting for " +
          std::to_string(group.size - group.arrived) + " of " +
          std::to_string(group.size) + " ranks");
    }
  }
  return Status::ok();
}

/// out[i] = op over members m (in order) of sends[m][offset + i]. Float
/// types round every partial sum to fp32, as a ring of fp32 adds would.
void reduceRun(const std::vector<const void *> &sends, DType dtype,
               int64_t offset, int64_t count, ReduceOp op, void *out) {
  bool roundToFloat = dtype == DType::F32 || dtype == DType::BF16;
  kernels::TensorView result{out, dtype};
  for (int64_t i = 0; i < count; ++i) {
    double acc = kernels::loadElement({sends[0], dtype}, offset + i);
    for (size_t m = 1; m < sends.size(); ++m) {
      double x = kernels::loadElement({sends[m], dtype}, offset + i);
      acc = op == ReduceOp::Sum ? acc + x : std::max(acc, x);
      if (roundToFloat)
        acc = static_cast<float>(acc);
    }
    kernels::storeElement(result, i, acc);
  }
}

Status checkDim(const char *name, const std::vector<int64_t> &shape,
                int64_t dim) {
  if (dim < 0 || dim >= static_cast<int64_t>(shape.size()))
    return Status::runtimeError(std::string(name) + ": dim " +
                                std::to_string(dim) + " out of range for " +
                                std::to_string(shape.size()) + "-d input");
  return Status::ok();
}
} // namespace

std::string collectiveShapeText(DType dtype,
                                const std::vector<int64_t> &shape) {
  return dtypeName(dtype) + opcheck::shapeText(shape);
}

Status HostCommunicator::run(const std::string &axis, const Call &call) {
  if (groupSize(axis) > 1)
    return runInGroup(axis, call);
  std::vector<std::byte> result(static_cast<size_t>(call.recvBytes));
  call.compute({call.send}, 0, result.data());
  if (!result.empty())
    std::memcpy(call.recv, result.data(), result.size());
  return Status::ok();
}

Status LocalCommunicator::runInGroup(const std::string &axis,
                                     const Call &call) {
  std::string what = std::string(call.name) + " over " + axis;
  auto it = world_->membership_[rank_].find(axis);
  std::vector<std::byte> result(static_cast<size_t>(call.recvBytes));
  if (world_->aborted_.load())
    return Status::runtimeError(what + ": aborted, another rank failed");
  CommWorld::Group &group = *it->second.first;
  int64_t index = it->second.second;
  std::vector<const void *> sends;
  {
    std::unique_lock<std::mutex> lock(group.mutex);
    group.sends[index] = call.send;
    group.signatures[index] = call.signature;
    SHARC_TRY(arriveAndWait(group, lock, world_->aborted_,
                            world_->timeoutSeconds_, what));
    for (size_t m = 0; m < group.signatures.size(); ++m)
      if (group.signatures[m] != call.signature)
        return Status::runtimeError(what + ": member " + std::to_string(m) +
                                    " called " + group.signatures[m] +
                                    " but this rank called " + call.signature);
    sends = group.sends;
  }
  call.compute(sends, index, result.data());
  {
    // Nobody overwrites its input (the result may alias it) until every
    // member has finished reading it.
    std::unique_lock<std::mutex> lock(group.mutex);
    SHARC_TRY(arriveAndWait(group, lock, world_->aborted_,
                            world_->timeoutSeconds_, what));
  }
  if (!result.empty())
    std::memcpy(call.recv, result.data(), result.size());
  return Status::ok();
}

Status HostCommunicator::allReduce(const void *send, void *recv, DType dtype,
                                   int64_t numel, ReduceOp op,
                                   const std::string &axis) {
  Call call{"all_reduce",
            std::string("all_reduce ") +
                (op == ReduceOp::Sum ? "sum " : "max ") +
                collectiveShapeText(dtype, {numel}),
            send,
            numel * dtypeSize(dtype),
            recv,
            numel * dtypeSize(dtype),
            [&](const std::vector<const void *> &sends, int64_t,
                std::byte *out) { reduceRun(sends, dtype, 0, numel, op, out); },
            /*pieceFor=*/nullptr};
  return run(axis, call);
}

Status HostCommunicator::allGather(const void *send, void *recv, DType dtype,
                                   const std::vector<int64_t> &sendShape,
                                   int64_t dim, const std::string &axis) {
  SHARC_TRY(checkDim("all_gather", sendShape, dim));
  int64_t members = groupSize(axis);
  int64_t outer = 1, chunkBytes = dtypeSize(dtype);
  for (int64_t d = 0; d < static_cast<int64_t>(sendShape.size()); ++d)
    (d < dim ? outer : chunkBytes) *= sendShape[d];
  Call call{
      "all_gather",
      "all_gather dim " + std::to_string(dim) + " " +
          collectiveShapeText(dtype, sendShape),
      send,
      outer * chunkBytes,
      recv,
      outer * chunkBytes * members,
      [&](const std::vector<const void *> &sends, int64_t, std::byte *out) {
        for (int64_t o = 0; o < outer; ++o)
          for (size_t m = 0; m < sends.size(); ++m)
            std::memcpy(
                out + (o * members + static_cast<int64_t>(m)) * chunkBytes,
                static_cast<const std::byte *>(sends[m]) + o * chunkBytes,
                static_cast<size_t>(chunkBytes));
      },
      /*pieceFor=*/nullptr};
  return run(axis, call);
}

Status HostCommunicator::reduceScatter(const void *send, void *recv,
                                       DType dtype,
                                       const std::vector<int64_t> &sendShape,
                                       int64_t dim, const std::string &axis) {
  SHARC_TRY(checkDim("reduce_scatter", sendShape, dim));
  int64_t members = groupSize(axis);
  if (sendShape[dim] % members != 0)
    return Status::runtimeError(
        "reduce_scatter over " + axis + ": dim " + std::to_string(dim) +
        " of extent " + std::to_string(sendShape[dim]) +
        " does not split over " + std::to_string(members) + " ranks");
  int64_t outer = 1, inner = 1; // inner: elements of dim and below
  for (int64_t d = 0; d < static_cast<int64_t>(sendShape.size()); ++d)
    (d < dim ? outer : inner) *= sendShape[d];
  int64_t chunk = inner / members, elementBytes = dtypeSize(dtype);
  Call call{"reduce_scatter",
            "reduce_scatter dim " + std::to_string(dim) + " " +
                collectiveShapeText(dtype, sendShape),
            send,
            outer * inner * elementBytes,
            recv,
            outer * chunk * elementBytes,
            [&](const std::vector<const void *> &sends, int64_t index,
                std::byte *out) {
              for (int64_t o = 0; o < outer; ++o)
                reduceRun(sends, dtype, o * inner + index * chunk, chunk,
                          ReduceOp::Sum, out + o * chunk * elementBytes);
            },
            [&](int64_t reader) {
              return InputPiece{outer, inner * elementBytes,
                                reader * chunk * elementBytes,
                                chunk * elementBytes};
            }};
  return run(axis, call);
}

Status HostCommunicator::allToAll(const void *send, void *recv, DType dtype,
                                  const std::vector<int64_t> &sendShape,
                                  int64_t splitDim, int64_t concatDim,
                                  const std::string &axis) {
  SHARC_TRY(checkDim("all_to_all", sendShape, splitDim));
  SHARC_TRY(checkDim("all_to_all", sendShape, concatDim));
  int64_t members = groupSize(axis);
  if (sendShape[splitDim] % members != 0 || splitDim == concatDim)
    return Status::runtimeError(
        "all_to_all over " + axis + ": dim " + std::to_string(splitDim) +
        " of extent " + std::to_string(sendShape[splitDim]) +
        " does not split over " + std::to_string(members) + " ranks into dim " +
        std::to_string(concatDim));
  std::vector<int64_t> outShape = sendShape;
  outShape[splitDim] /= members;
  outShape[concatDim] *= members;
  int64_t rank = static_cast<int64_t>(sendShape.size());
  int64_t elementBytes = dtypeSize(dtype), numel = 1;
  std::vector<int64_t> inStride(rank, 1);
  for (int64_t d = rank - 1; d >= 0; --d) {
    numel *= outShape[d];
    if (d + 1 < rank)
      inStride[d] = inStride[d + 1] * sendShape[d + 1];
  }
  Call call{
      "all_to_all",
      "all_to_all split " + std::to_string(splitDim) + " concat " +
          std::to_string(concatDim) + " " +
          collectiveShapeText(dtype, sendShape),
      send,
      numel * elementBytes,
      recv,
      numel * elementBytes,
      [&](const std::vector<const void *> &sends, int64_t index,
          std::byte *out) {
        // Element by element: the reference, not the fast path. Output
        // index o comes from member o[concat] / extent, at o with that
        // block removed and this rank's piece of the split dim added.
        std::vector<int64_t> at(rank, 0);
        for (int64_t flat = 0; flat < numel; ++flat) {
          int64_t member = at[concatDim] / sendShape[concatDim], offset = 0;
          for (int64_t d = 0; d < rank; ++d) {
            int64_t i = at[d];
            if (d == concatDim)
              i %= sendShape[concatDim];
            else if (d == splitDim)
              i += index * outShape[splitDim];
            offset += i * inStride[d];
          }
          std::memcpy(out + flat * elementBytes,
                      static_cast<const std::byte *>(sends[member]) +
                          offset * elementBytes,
                      static_cast<size_t>(elementBytes));
          for (int64_t d = rank - 1; d >= 0 && ++at[d] == outShape[d]; --d)
            at[d] = 0;
        }
      },
      [&](int64_t reader) {
        // Its block of the split dim, in every index of the dims before.
        int64_t outer = 1, block = outShape[splitDim] * inStride[splitDim];
        for (int64_t d = 0; d < splitDim; ++d)
          outer *= sendShape[d];
        return InputPiece{
            outer, sendShape[splitDim] * inStride[splitDim] * elementBytes,
            reader * block * elementBytes, block * elementBytes};
      }};
  return run(axis, call);
}

Result<int64_t> meshPeerRank(const std::vector<plan::MeshAxis> &mesh,
                             int64_t rank, int64_t peer,
                             const std::string &axis) {
  std::vector<int64_t> coords = meshCoords(mesh, rank);
  int64_t result = 0;
  bool found = false;
  for (size_t a = 0; a < mesh.size(); ++a) {
    if (mesh[a].name == axis) {
      if (peer < 0 || peer >= mesh[a].size)
        return Status::runtimeError("peer " + std::to_string(peer) +
                                    " out of range for " + axis + " (" +
                                    std::to_string(mesh[a].size) + ")");
      coords[a] = peer;
      found = true;
    }
    result = result * mesh[a].size + coords[a];
  }
  if (!found)
    return Status::runtimeError("no mesh axis '" + axis + "'");
  return result;
}

Status LocalCommunicator::send(const void *data, int64_t numBytes, int64_t peer,
                               int64_t tag, const std::string &axis) {
  auto to = meshPeerRank(world_->mesh_, rank_, peer, axis);
  if (!to)
    return to.status().withContext("send over " + axis);
  const auto *bytes = static_cast<const std::byte *>(data);
  std::vector<std::byte> message(bytes, bytes + numBytes);
  CommWorld::Mailbox &mailbox = *world_->mailbox_;
  std::lock_guard<std::mutex> lock(mailbox.mutex);
  mailbox.queues[{rank_, *to, tag}].push_back(std::move(message));
  mailbox.arrived.notify_all();
  return Status::ok();
}

Status LocalCommunicator::recv(void *data, int64_t numBytes, int64_t peer,
                               int64_t tag, const std::string &axis) {
  std::string what = "recv over " + axis + " from " + std::to_string(peer) +
                     " (tag " + std::to_string(tag) + ")";
  auto from = meshPeerRank(world_->mesh_, rank_, peer, axis);
  if (!from)
    return from.status().withContext(what);
  CommWorld::Mailbox &mailbox = *world_->mailbox_;
  std::unique_lock<std::mutex> lock(mailbox.mutex);
  auto &queue = mailbox.queues[{*from, rank_, tag}];
  auto deadline = deadlineAfter(world_->timeoutSeconds_);
  while (queue.empty()) {
    if (world_->aborted_.load())
      return Status::runtimeError(what + ": aborted, another rank failed");
    if (mailbox.arrived.wait_until(lock, deadline) == std::cv_status::timeout &&
        queue.empty())
      return Status::runtimeError(what + ": timed out, nothing was sent");
  }
  std::vector<std::byte> message = std::move(queue.front());
  queue.pop_front();
  if (static_cast<int64_t>(message.size()) != numBytes)
    return Status::runtimeError(what + ": expected " +
                                std::to_string(numBytes) + " bytes, got " +
                                std::to_string(message.size()));
  std::memcpy(data, message.data(), message.size());
  return Status::ok();
}

Status HostCommunicator::barrier(const std::string &axis) {
  Call call{"barrier",
            "barrier",
            nullptr,
            0,
            nullptr,
            0,
            [](const std::vector<const void *> &, int64_t, std::byte *) {},
            /*pieceFor=*/nullptr};
  return run(axis, call);
}

} // namespace sharc::exec
