//===- ProcessCommunicator.cpp - the cpu's collectives over processes -----===//

#include "executor/ProcessCommunicator.h"

#include "executor/Deadline.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace sharc::exec {

namespace {

using Clock = std::chrono::steady_clock;

/// A collective's message: the signature's length (4 bytes), the
/// signature, then the input from a 16-byte boundary (the compute reads
/// its elements in place).
constexpr size_t kAlign = 16;

size_t payloadOffset(size_t signatureBytes) {
  return (4 + signatureBytes + kAlign - 1) / kAlign * kAlign;
}

/// The message of `piece` of `send`: its runs back to back.
template <typename Piece>
std::vector<std::byte> packInput(const std::string &signature, const void *send,
                                 const Piece &piece) {
  size_t offset = payloadOffset(signature.size());
  std::vector<std::byte> message(offset + static_cast<size_t>(piece.bytes()));
  auto length = static_cast<uint32_t>(signature.size());
  std::memcpy(message.data(), &length, 4);
  std::memcpy(message.data() + 4, signature.data(), signature.size());
  const auto *from = static_cast<const std::byte *>(send) + piece.offset;
  for (int64_t run = 0; run < piece.count && piece.length > 0; ++run)
    std::memcpy(message.data() + offset + run * piece.length,
                from + run * piece.stride, static_cast<size_t>(piece.length));
  return message;
}

/// A sender's input as this member reads it: its piece's runs at their
/// places, every other byte 0xff, so that reading outside the piece
/// shows (a NaN in every float type).
template <typename Piece>
std::vector<std::byte> unpackInput(const std::byte *payload, const Piece &piece,
                                   int64_t inputBytes) {
  std::vector<std::byte> input(static_cast<size_t>(inputBytes),
                               std::byte{0xff});
  for (int64_t run = 0; run < piece.count && piece.length > 0; ++run)
    std::memcpy(input.data() + piece.offset + run * piece.stride,
                payload + run * piece.length,
                static_cast<size_t>(piece.length));
  return input;
}

} // namespace

ProcessCommunicator::ProcessCommunicator(
    const std::vector<plan::MeshAxis> &mesh, int64_t rank,
    int64_t ranksPerProcess, ProcessChannel *channel, double timeoutSeconds,
    const std::atomic<bool> *aborted)
    : mesh_(mesh), rank_(rank), ranksPerProcess_(ranksPerProcess),
      channel_(channel), timeoutSeconds_(timeoutSeconds), aborted_(aborted) {
  for (MeshGroup &group : meshGroups(mesh_))
    for (size_t i = 0; i < group.ranks.size(); ++i)
      if (group.ranks[i] == rank_) {
        groups_[group.axes] = {std::move(group.ranks), static_cast<int64_t>(i)};
        break;
      }
}

int64_t ProcessCommunicator::groupSize(const std::string &axis) const {
  auto it = groups_.find(axis);
  return it == groups_.end() ? 1
                             : static_cast<int64_t>(it->second.first.size());
}

int64_t ProcessCommunicator::groupIndex(const std::string &axis) const {
  auto it = groups_.find(axis);
  return it == groups_.end() ? 0 : it->second.second;
}

bool ProcessCommunicator::hasGroup(const std::string &axis) const {
  return groups_.count(axis) > 0;
}

Result<int64_t> ProcessCommunicator::channelTag(MessageKind kind, int64_t from,
                                                int64_t to) const {
  int64_t local = ranksPerProcess_;
  if (2 * local * local - 1 > channel_->maxTag())
    return Status::runtimeError(
        std::to_string(local) + " ranks per process need tags up to " +
        std::to_string(2 * local * local - 1) + ", beyond the " +
        std::to_string(channel_->maxTag()) +
        " this MPI library carries: launch more processes");
  return (static_cast<int64_t>(kind) * local + from % local) * local +
         to % local;
}

Status ProcessCommunicator::runInGroup(const std::string &axis,
                                       const Call &call) {
  std::string what = std::string(call.name) + " over " + axis;
  std::vector<std::byte> result(static_cast<size_t>(call.recvBytes));
  auto it = groups_.find(axis);
  if (aborted_->load())
    return Status::runtimeError(what + ": aborted, another rank failed");
  const auto &[ranks, index] = it->second;
  // Each member is sent the piece of this input it reads (the whole input
  // but for reduce_scatter and all_to_all).
  auto pieceFor = [&](int64_t reader) {
    return call.pieceFor ? call.pieceFor(reader)
                         : InputPiece{1, call.sendBytes, 0, call.sendBytes};
  };
  std::vector<uint64_t> tickets;
  for (size_t m = 0; m < ranks.size(); ++m) {
    if (static_cast<int64_t>(m) == index)
      continue;
    auto tag = channelTag(MessageKind::Collective, rank_, ranks[m]);
    if (!tag)
      return tag.status().withContext(what);
    auto ticket = channel_->send(processOf(ranks[m]), *tag,
                                 packInput(call.signature, call.send,
                                           pieceFor(static_cast<int64_t>(m))));
    if (!ticket)
      return ticket.status().withContext(what);
    tickets.push_back(*ticket);
  }
  // Every member's input, this rank's in place.
  InputPiece mine = pieceFor(index);
  bool whole = mine.bytes() == call.sendBytes;
  std::vector<std::vector<std::byte>> received(ranks.size());
  std::vector<const void *> sends(ranks.size(), call.send);
  for (size_t m = 0; m < ranks.size(); ++m) {
    if (static_cast<int64_t>(m) == index)
      continue;
    auto tag = channelTag(MessageKind::Collective, ranks[m], rank_);
    if (!tag)
      return tag.status().withContext(what);
    auto got = channel_->receive(processOf(ranks[m]), *tag, timeoutSeconds_,
                                 *aborted_);
    if (!got)
      return Status::runtimeError(what + ": from member " + std::to_string(m) +
                                  " (rank " + std::to_string(ranks[m]) +
                                  "): " + got.status().message());
    std::vector<std::byte> &bytes = *got;
    uint32_t length = 0;
    if (bytes.size() >= 4)
      std::memcpy(&length, bytes.data(), 4);
    size_t offset = payloadOffset(length);
    std::string theirs =
        bytes.size() >= offset
            ? std::string(reinterpret_cast<const char *>(bytes.data()) + 4,
                          length)
            : "a message of " + std::to_string(bytes.size()) + " bytes";
    // Equal signatures mean equal input sizes, as every member computes
    // the sizes from its own signature's shape.
    if (theirs != call.signature ||
        bytes.size() - offset != static_cast<size_t>(mine.bytes()))
      return Status::runtimeError(what + ": member " + std::to_string(m) +
                                  " called " + theirs +
                                  " but this rank called " + call.signature);
    if (whole) {
      received[m] = std::move(bytes);
      sends[m] = received[m].data() + offset;
    } else {
      received[m] = unpackInput(bytes.data() + offset, mine, call.sendBytes);
      sends[m] = received[m].data();
    }
  }
  // Every member has this input (or is taking it) once these return; the
  // waits drive MPI's progress, which moves a large message.
  for (uint64_t ticket : tickets)
    if (Status sent = channel_->waitSent(ticket, timeoutSeconds_, *aborted_);
        !sent)
      return Status::runtimeError(what + ": " + sent.message());
  call.compute(sends, index, result.data());
  if (!result.empty())
    std::memcpy(call.recv, result.data(), result.size());
  return Status::ok();
}

Status ProcessCommunicator::send(const void *data, int64_t numBytes,
                                 int64_t peer, int64_t tag,
                                 const std::string &axis) {
  std::string what = "send over " + axis + " to " + std::to_string(peer) +
                     " (tag " + std::to_string(tag) + ")";
  auto to = meshPeerRank(mesh_, rank_, peer, axis);
  if (!to)
    return to.status().withContext(what);
  auto channelTagOf = channelTag(MessageKind::Transfer, rank_, *to);
  if (!channelTagOf)
    return channelTagOf.status().withContext(what);
  // The plan's tag (any 64-bit value, a ring's among them) travels in the
  // message; the channel's tag only names the two ranks.
  std::vector<std::byte> message(8 + static_cast<size_t>(numBytes));
  std::memcpy(message.data(), &tag, 8);
  if (numBytes > 0)
    std::memcpy(message.data() + 8, data, static_cast<size_t>(numBytes));
  auto ticket =
      channel_->send(processOf(*to), *channelTagOf, std::move(message));
  if (!ticket)
    return ticket.status().withContext(what);
  return Status::ok();
}

Status ProcessCommunicator::recv(void *data, int64_t numBytes, int64_t peer,
                                 int64_t tag, const std::string &axis) {
  std::string what = "recv over " + axis + " from " + std::to_string(peer) +
                     " (tag " + std::to_string(tag) + ")";
  auto from = meshPeerRank(mesh_, rank_, peer, axis);
  if (!from)
    return from.status().withContext(what);
  auto channelTagOf = channelTag(MessageKind::Transfer, *from, rank_);
  if (!channelTagOf)
    return channelTagOf.status().withContext(what);
  // Messages of other tags that came first wait in the stash for their
  // own recv, as LocalCommunicator's mailbox keeps them.
  auto deadline = deadlineAfter(timeoutSeconds_);
  std::vector<std::byte> message;
  for (;;) {
    auto stashed = stash_.find({*from, tag});
    if (stashed != stash_.end() && !stashed->second.empty()) {
      message = std::move(stashed->second.front());
      stashed->second.pop_front();
      break;
    }
    double left =
        std::chrono::duration<double>(deadline - Clock::now()).count();
    auto got = channel_->receive(processOf(*from), *channelTagOf,
                                 std::max(left, 0.0), *aborted_);
    if (!got)
      return Status::runtimeError(what + ": " + got.status().message());
    int64_t gotTag = 0;
    if (got->size() < 8)
      return Status::runtimeError(what + ": a message of " +
                                  std::to_string(got->size()) + " bytes");
    std::memcpy(&gotTag, got->data(), 8);
    stash_[{*from, gotTag}].push_back(std::move(*got));
  }
  if (static_cast<int64_t>(message.size()) - 8 != numBytes)
    return Status::runtimeError(what + ": expected " +
                                std::to_string(numBytes) + " bytes, got " +
                                std::to_string(message.size() - 8));
  if (numBytes > 0)
    std::memcpy(data, message.data() + 8, static_cast<size_t>(numBytes));
  return Status::ok();
}

} // namespace sharc::exec
