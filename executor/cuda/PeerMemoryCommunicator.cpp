//===- PeerMemoryCommunicator.cpp - ranks reading each other's memory -----===//

#include "executor/cuda/PeerMemoryCommunicator.h"

#include "executor/CollectiveLayout.h"
#include "executor/Deadline.h"
#include "kernels/Copy.h"
#include "kernels/cuda/Launch.h"
#include "kernels/cuda/MemberReduce.h"

#include <algorithm>
#include <chrono>
#include <functional>

namespace sharc::exec {

namespace {

/// What a member tells its group at the meeting, as 8-byte words (the host
/// all_gather moves them as f64 elements, bit for bit).
struct Posting {
  int64_t send, sendBytes, recv, recvBytes, ready, done;
  uint64_t signature;
};
constexpr int64_t kPostingWords = sizeof(Posting) / 8;
static_assert(sizeof(Posting) % 8 == 0);

bool overlaps(int64_t a, int64_t aBytes, int64_t b, int64_t bBytes) {
  return aBytes > 0 && bBytes > 0 && a < b + bBytes && b < a + aBytes;
}

template <typename T> int64_t word(T *pointer) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(pointer));
}
template <typename T> T *pointer(int64_t word) {
  return reinterpret_cast<T *>(static_cast<intptr_t>(word));
}

/// A reduction over every member's input (reduceMembers refuses more
/// members than it takes).
kernels::cuda::MemberReduceArgs
reduceOver(const std::vector<const void *> &sends, DType dtype) {
  kernels::cuda::MemberReduceArgs args;
  size_t taken =
      std::min<size_t>(sends.size(), kernels::cuda::kMaxReduceMembers);
  std::copy(sends.begin(), sends.begin() + taken, args.srcs);
  args.numMembers = static_cast<int>(sends.size());
  args.dtype = dtype;
  return args;
}

} // namespace

PeerMemoryWorld::~PeerMemoryWorld() {
  for (auto &[rank, events] : events_) {
    cudaEventDestroy(events.first);
    cudaEventDestroy(events.second);
  }
  for (auto &slot : slots_) {
    cudaFree(slot->data);
    if (slot->filled)
      cudaEventDestroy(slot->filled);
    if (slot->drained)
      cudaEventDestroy(slot->drained);
  }
}

void PeerMemoryWorld::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  // A message no recv took never had its slot drained: the slot stays
  // owned (slots_) but is not reused.
  for (auto &[link, channel] : channels_)
    channel.queue.clear();
}

void PeerMemoryWorld::wakeAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  arrived_.notify_all();
}

PeerMemoryCommunicator::~PeerMemoryCommunicator() {
  if (scratch_)
    cudaFree(scratch_);
}

Status PeerMemoryCommunicator::makeEvents() {
  if (ready_)
    return Status::ok();
  SHARC_CUDA(cudaSetDevice(device_));
  std::lock_guard<std::mutex> lock(world_.mutex_);
  auto it = world_.events_.find(local_.rank());
  if (it == world_.events_.end()) {
    cudaEvent_t ready = nullptr, done = nullptr;
    SHARC_CUDA(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    SHARC_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    it = world_.events_.emplace(local_.rank(), std::make_pair(ready, done))
             .first;
  }
  ready_ = it->second.first;
  done_ = it->second.second;
  return Status::ok();
}

Result<std::byte *> PeerMemoryCommunicator::scratch(int64_t numBytes) {
  if (numBytes > scratchBytes_) {
    // Grows in the first step only; what the old buffer still has queued
    // finishes first (every wait on the stream is on an event already
    // recorded, so this returns).
    SHARC_CUDA(cudaSetDevice(device_));
    SHARC_CUDA(cudaStreamSynchronize(stream_));
    if (scratch_)
      SHARC_CUDA(cudaFree(scratch_));
    scratch_ = nullptr;
    scratchBytes_ = 0;
    SHARC_CUDA(cudaMalloc(&scratch_, static_cast<size_t>(numBytes)));
    scratchBytes_ = numBytes;
  }
  return static_cast<std::byte *>(scratch_);
}

Status PeerMemoryCommunicator::run(const std::string &axis, const Call &call) {
  std::string what = call.signature + " over " + axis;
  int64_t members = groupSize(axis);
  // A group of one: the result is the input.
  if (members == 1) {
    if (call.recv != call.send && call.recvBytes > 0)
      SHARC_CUDA(cudaMemcpyAsync(call.recv, call.send,
                                 static_cast<size_t>(call.recvBytes),
                                 cudaMemcpyDefault, stream_));
    return Status::ok();
  }
  SHARC_TRY(makeEvents());
  int64_t index = groupIndex(axis);
  Posting mine{word(call.send),
               call.sendBytes,
               word(call.recv),
               call.recvBytes,
               word(ready_),
               word(done_),
               std::hash<std::string>{}(call.signature)};
  std::vector<Posting> postings(static_cast<size_t>(members));
  SHARC_CUDA(cudaEventRecord(ready_, stream_));
  SHARC_TRY(local_
                .allGather(&mine, postings.data(), DType::F64, {kPostingWords},
                           0, axis)
                .withContext(what));
  std::vector<const void *> sends;
  bool staged = false;
  for (int64_t m = 0; m < members; ++m) {
    const Posting &peer = postings[m];
    if (peer.signature != mine.signature)
      return Status::runtimeError(what + ": member " + std::to_string(m) +
                                  " called another collective");
    sends.push_back(pointer<const void>(peer.send));
    staged |= overlaps(peer.send, peer.sendBytes, mine.recv, mine.recvBytes);
    if (m != index)
      SHARC_CUDA(
          cudaStreamWaitEvent(stream_, pointer<CUevent_st>(peer.ready), 0));
  }
  int64_t resultBytes = staged ? call.recvBytes : 0;
  std::byte *base = nullptr;
  if (resultBytes + call.extraScratchBytes > 0) {
    auto space = scratch(resultBytes + call.extraScratchBytes);
    if (!space)
      return space.status();
    base = *space;
  }
  std::byte *out = staged ? base : static_cast<std::byte *>(call.recv);
  SHARC_TRY(
      call.compute(sends, index, out, base + resultBytes).withContext(what));
  // Nobody writes over its input until every member has read it.
  SHARC_CUDA(cudaEventRecord(done_, stream_));
  SHARC_TRY(local_.barrier(axis).withContext(what));
  for (int64_t m = 0; m < members; ++m)
    if (m != index)
      SHARC_CUDA(cudaStreamWaitEvent(stream_,
                                     pointer<CUevent_st>(postings[m].done), 0));
  if (staged)
    SHARC_CUDA(cudaMemcpyAsync(call.recv, out,
                               static_cast<size_t>(call.recvBytes),
                               cudaMemcpyDefault, stream_));
  return Status::ok();
}

Status PeerMemoryCommunicator::allReduce(const void *send, void *recv,
                                         DType dtype, int64_t numel,
                                         ReduceOp op, const std::string &axis) {
  int64_t bytes = numel * dtypeSize(dtype);
  Call call{.signature = std::string("all_reduce ") +
                         (op == ReduceOp::Sum ? "sum " : "max ") +
                         collectiveShapeText(dtype, {numel}),
            .send = send,
            .sendBytes = bytes,
            .recv = recv,
            .recvBytes = bytes,
            .compute = [&](const std::vector<const void *> &sends, int64_t,
                           std::byte *out, std::byte *) {
              kernels::cuda::MemberReduceArgs args = reduceOver(sends, dtype);
              args.max = op == ReduceOp::Max;
              args.cols = args.srcPitch = args.dstPitch = numel;
              args.dst = out;
              return kernels::cuda::reduceMembers(args, stream_);
            }};
  return run(axis, call);
}

Status PeerMemoryCommunicator::allGather(const void *send, void *recv,
                                         DType dtype,
                                         const std::vector<int64_t> &sendShape,
                                         int64_t dim, const std::string &axis) {
  if (dim < 0 || dim >= static_cast<int64_t>(sendShape.size()))
    return Status::runtimeError("all_gather over " + axis + ": dim " +
                                std::to_string(dim) + " out of range");
  int64_t members = groupSize(axis);
  DimSplit split = splitAt(sendShape, dim, dtypeSize(dtype));
  int64_t chunkBytes = split.extent * split.innerBytes;
  Call call{.signature = "all_gather dim " + std::to_string(dim) + " " +
                         collectiveShapeText(dtype, sendShape),
            .send = send,
            .sendBytes = split.outer * chunkBytes,
            .recv = recv,
            .recvBytes = split.outer * chunkBytes * members,
            .compute = [&](const std::vector<const void *> &sends, int64_t,
                           std::byte *out, std::byte *) {
              for (int64_t m = 0; m < members; ++m)
                SHARC_TRY(
                    kernels::cuda::copy2d({.src = sends[m],
                                           .dst = out + m * chunkBytes,
                                           .rows = split.outer,
                                           .rowBytes = chunkBytes,
                                           .srcPitch = chunkBytes,
                                           .dstPitch = chunkBytes * members},
                                          stream_));
              return Status::ok();
            }};
  return run(axis, call);
}

Status
PeerMemoryCommunicator::reduceScatter(const void *send, void *recv, DType dtype,
                                      const std::vector<int64_t> &sendShape,
                                      int64_t dim, const std::string &axis) {
  int64_t members = groupSize(axis);
  if (dim < 0 || dim >= static_cast<int64_t>(sendShape.size()) ||
      sendShape[dim] % members != 0)
    return Status::runtimeError(
        "reduce_scatter over " + axis + ": dim " + std::to_string(dim) +
        " of a rank-" + std::to_string(sendShape.size()) +
        " input does not split over " + std::to_string(members) + " ranks");
  int64_t elementBytes = dtypeSize(dtype);
  DimSplit split = splitAt(sendShape, dim, elementBytes);
  int64_t inner = split.extent * split.innerBytes / elementBytes;
  int64_t chunk = inner / members;
  Call call{.signature = "reduce_scatter dim " + std::to_string(dim) + " " +
                         collectiveShapeText(dtype, sendShape),
            .send = send,
            .sendBytes = split.outer * inner * elementBytes,
            .recv = recv,
            .recvBytes = split.outer * chunk * elementBytes,
            .compute = [&](const std::vector<const void *> &sends,
                           int64_t index, std::byte *out, std::byte *) {
              kernels::cuda::MemberReduceArgs args = reduceOver(sends, dtype);
              args.rows = split.outer;
              args.cols = args.dstPitch = chunk;
              args.srcOffset = index * chunk;
              args.srcPitch = inner;
              args.dst = out;
              return kernels::cuda::reduceMembers(args, stream_);
            }};
  return run(axis, call);
}

Status PeerMemoryCommunicator::allToAll(const void *send, void *recv,
                                        DType dtype,
                                        const std::vector<int64_t> &sendShape,
                                        int64_t splitDim, int64_t concatDim,
                                        const std::string &axis) {
  int64_t members = groupSize(axis);
  auto layout = allToAllLayout(sendShape, splitDim, concatDim, members,
                               dtypeSize(dtype), axis);
  if (!layout)
    return layout.status();
  int64_t sendBytes = layout->sendBytes, pieceBytes = layout->pieceBytes;
  Call call{
      .signature = "all_to_all split " + std::to_string(splitDim) + " concat " +
                   std::to_string(concatDim) + " " +
                   collectiveShapeText(dtype, sendShape),
      .send = send,
      .sendBytes = sendBytes,
      .recv = recv,
      .recvBytes = sendBytes,
      // A piece of strided rows is packed first.
      .extraScratchBytes = layout->piecesStrided() ? sendBytes : 0,
      .compute = [&](const std::vector<const void *> &sends, int64_t index,
                     std::byte *out, std::byte *packed) {
        for (int64_t m = 0; m < members; ++m) {
          // This rank's piece of member m's input.
          const void *piece =
              static_cast<const std::byte *>(sends[m]) + index * pieceBytes;
          if (layout->piecesStrided()) {
            piece = packed + m * pieceBytes;
            SHARC_TRY(kernels::cuda::copy2d(
                layout->packPiece(sends[m], index, packed + m * pieceBytes),
                stream_));
          }
          SHARC_TRY(kernels::cuda::copy2d(layout->placeBlock(piece, m, out),
                                          stream_));
        }
        return Status::ok();
      }};
  return run(axis, call);
}

// Transfers pair in order, as NCCL's do (tags are not matched), so a plan
// whose stages list their transfers in orders NCCL would pair wrongly fails
// here too.
Status PeerMemoryCommunicator::send(const void *data, int64_t numBytes,
                                    int64_t peer, int64_t /*tag*/,
                                    const std::string &axis) {
  auto to = meshPeerRank(world_.mesh(), local_.rank(), peer, axis);
  if (!to)
    return to.status().withContext("send over " + axis);
  PeerMemoryWorld::Channel *channel = nullptr;
  PeerMemoryWorld::Slot *slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(world_.mutex_);
    channel = &world_.channels_[{local_.rank(), *to}];
    auto it = std::find_if(channel->free.begin(), channel->free.end(),
                           [&](PeerMemoryWorld::Slot *free) {
                             return free->capacity >= numBytes;
                           });
    if (it != channel->free.end()) {
      slot = *it;
      channel->free.erase(it);
    }
  }
  SHARC_CUDA(cudaSetDevice(device_));
  if (slot) {
    // The receiver's copy out of it has run.
    SHARC_CUDA(cudaStreamWaitEvent(stream_, slot->drained, 0));
  } else {
    auto made = std::make_unique<PeerMemoryWorld::Slot>();
    made->capacity = std::max<int64_t>(numBytes, 1);
    made->device = device_;
    SHARC_CUDA(cudaMalloc(&made->data, static_cast<size_t>(made->capacity)));
    SHARC_CUDA(cudaEventCreateWithFlags(&made->filled, cudaEventDisableTiming));
    slot = made.get();
    std::lock_guard<std::mutex> lock(world_.mutex_);
    world_.slots_.push_back(std::move(made));
  }
  if (numBytes > 0)
    SHARC_CUDA(cudaMemcpyAsync(slot->data, data, static_cast<size_t>(numBytes),
                               cudaMemcpyDefault, stream_));
  SHARC_CUDA(cudaEventRecord(slot->filled, stream_));
  std::lock_guard<std::mutex> lock(world_.mutex_);
  channel->queue.push_back({slot, numBytes});
  world_.arrived_.notify_all();
  return Status::ok();
}

Status PeerMemoryCommunicator::recv(void *data, int64_t numBytes, int64_t peer,
                                    int64_t /*tag*/, const std::string &axis) {
  std::string what = "recv over " + axis + " from " + std::to_string(peer);
  auto from = meshPeerRank(world_.mesh(), local_.rank(), peer, axis);
  if (!from)
    return from.status().withContext(what);
  PeerMemoryWorld::Message message;
  PeerMemoryWorld::Channel *channel = nullptr;
  {
    std::unique_lock<std::mutex> lock(world_.mutex_);
    channel = &world_.channels_[{*from, local_.rank()}];
    auto deadline = deadlineAfter(world_.timeoutSeconds());
    // Polled, so that an abort of the rendezvous' world is seen too.
    while (channel->queue.empty()) {
      if (commWorld_.isAborted())
        return Status::runtimeError(what + ": aborted, another rank failed");
      if (std::chrono::steady_clock::now() >= deadline)
        return Status::runtimeError(what + ": timed out, nothing was sent");
      world_.arrived_.wait_for(lock, std::chrono::milliseconds(50));
    }
    message = channel->queue.front();
    channel->queue.pop_front();
  }
  if (message.numBytes != numBytes)
    return Status::runtimeError(what + ": expected " +
                                std::to_string(numBytes) + " bytes, got " +
                                std::to_string(message.numBytes));
  PeerMemoryWorld::Slot *slot = message.slot;
  SHARC_CUDA(cudaSetDevice(device_));
  SHARC_CUDA(cudaStreamWaitEvent(stream_, slot->filled, 0));
  if (numBytes > 0)
    SHARC_CUDA(cudaMemcpyAsync(data, slot->data, static_cast<size_t>(numBytes),
                               cudaMemcpyDefault, stream_));
  // A channel has one receiver, so its slots' drained events are all on
  // this GPU.
  if (!slot->drained)
    SHARC_CUDA(
        cudaEventCreateWithFlags(&slot->drained, cudaEventDisableTiming));
  SHARC_CUDA(cudaEventRecord(slot->drained, stream_));
  std::lock_guard<std::mutex> lock(world_.mutex_);
  channel->free.push_back(slot);
  return Status::ok();
}

} // namespace sharc::exec
