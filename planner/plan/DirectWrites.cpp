//===- DirectWrites.cpp - a large file written past the page cache --------===//

#include "planner/plan/DirectWrites.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <system_error>
#include <unistd.h>

using namespace sharc;

namespace {

/// Two slots being written and one being filled.
constexpr int kWriters = 2;
constexpr size_t kSlots = kWriters + 1;

/// Writes all `size` bytes at `offset`; the errno of a failure, else 0.
int writeAll(int fd, const char *data, int64_t size, int64_t offset) {
  while (size > 0) {
    ssize_t written = ::pwrite(fd, data, static_cast<size_t>(size), offset);
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      return written < 0 ? errno : EIO;
    data += written;
    size -= written;
    offset += written;
  }
  return 0;
}

} // namespace

DirectWrites::DirectWrites(const std::string &path, int fd, int64_t slotBytes)
    : fd_(fd),
      slotBytes_((std::max(slotBytes, kAlign) + kAlign - 1) / kAlign * kAlign) {
  directFd_ = ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  // Slots only pay where they can go out past the page cache.
  ordinary_ = directFd_ < 0;
}

DirectWrites::~DirectWrites() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread &writer : writers_)
    writer.join();
  if (directFd_ >= 0)
    ::close(directFd_);
}

Status DirectWrites::firstError() {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_.empty() ? Status::ok() : Status::runtimeError(error_);
}

Status DirectWrites::append(std::string_view bytes) {
  SHARC_TRY(firstError());
  if (ordinary_)
    return writeOrdinary(bytes);
  // Until a slot's worth or 1 MiB has come, the bytes wait in head_: a
  // small file takes no slot's memory (nor a thread).
  if (storage_.empty()) {
    int64_t headBytes = std::min<int64_t>(slotBytes_, int64_t{1} << 20);
    if (static_cast<int64_t>(head_.size() + bytes.size()) < headBytes) {
      head_.append(bytes);
      return Status::ok();
    }
    std::string head = std::move(head_);
    head_ = std::string();
    SHARC_TRY(appendToSlots(head));
  }
  return appendToSlots(bytes);
}

Status DirectWrites::appendToSlots(std::string_view bytes) {
  while (!bytes.empty()) {
    if (!current_.bytes) {
      std::unique_lock<std::mutex> lock(mutex_);
      if (free_.empty() && storage_.size() < kSlots) {
        void *memory = std::aligned_alloc(static_cast<size_t>(kAlign),
                                          static_cast<size_t>(slotBytes_));
        if (memory) {
          storage_.emplace_back(static_cast<char *>(memory), std::free);
          free_.push_back(storage_.back().get());
        }
      }
      // A host without memory for one slot writes through the page cache
      // from the caller's bytes, as before there were slots.
      if (storage_.empty()) {
        lock.unlock();
        ordinary_ = true;
        return writeOrdinary(bytes);
      }
      changed_.wait(lock, [&] { return !free_.empty(); });
      current_ = {free_.back(), 0, offset_};
      free_.pop_back();
    }
    int64_t take = std::min<int64_t>(static_cast<int64_t>(bytes.size()),
                                     slotBytes_ - current_.used);
    std::memcpy(current_.bytes + current_.used, bytes.data(),
                static_cast<size_t>(take));
    current_.used += take;
    bytes.remove_prefix(static_cast<size_t>(take));
    if (current_.used == slotBytes_)
      SHARC_TRY(submit());
  }
  return Status::ok();
}

Status DirectWrites::writeOrdinary(std::string_view bytes) {
  if (int error = writeAll(fd_, bytes.data(),
                           static_cast<int64_t>(bytes.size()), offset_))
    return Status::runtimeError(std::strerror(error));
  offset_ += static_cast<int64_t>(bytes.size());
  return Status::ok();
}

Status DirectWrites::submit() {
  Slot slot = current_;
  current_ = {};
  offset_ += slot.used;
  if (writers_.empty()) {
    for (int i = 0; i < kWriters; ++i) {
      try {
        writers_.emplace_back([this] { writerLoop(); });
      } catch (const std::system_error &) {
        break; // the slots left go out on fewer writers, or here
      }
    }
  }
  if (writers_.empty()) {
    Status written = writeSlot(slot);
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(slot.bytes);
    return written;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued_.push_back(slot);
  }
  changed_.notify_all();
  return Status::ok();
}

void DirectWrites::writerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queued_.empty(); });
    if (queued_.empty())
      return; // stopping, with nothing left to write
    Slot slot = queued_.front();
    queued_.pop_front();
    ++busy_;
    lock.unlock();
    Status written = writeSlot(slot);
    lock.lock();
    --busy_;
    if (!written && error_.empty())
      error_ = written.message();
    free_.push_back(slot.bytes);
    changed_.notify_all();
  }
}

Status DirectWrites::writeSlot(const Slot &slot) {
  // Whole pages with O_DIRECT (the offset is a multiple of a slot, so of a
  // page); a file system that takes the descriptor but refuses the write
  // (EINVAL) gets the slot through the page cache instead.
  int64_t direct = directRefused_ ? 0 : slot.used / kAlign * kAlign;
  int error =
      direct > 0 ? writeAll(directFd_, slot.bytes, direct, slot.offset) : 0;
  if (error == EINVAL) {
    directRefused_ = true;
    direct = 0;
  } else if (error != 0)
    return Status::runtimeError(std::strerror(error));
  else if (direct > 0)
    wroteDirect_ = true;
  error = writeAll(fd_, slot.bytes + direct, slot.used - direct,
                   slot.offset + direct);
  return error == 0 ? Status::ok() : Status::runtimeError(std::strerror(error));
}

Status DirectWrites::finish() {
  SHARC_TRY(firstError());
  // A file of less than a slot goes through the page cache whole.
  SHARC_TRY(writeOrdinary(head_));
  head_ = std::string();
  if (current_.bytes) {
    Slot slot = current_;
    current_ = {};
    offset_ += slot.used;
    Status written = writeSlot(slot);
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(slot.bytes);
    if (!written)
      return written;
  }
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return queued_.empty() && busy_ == 0; });
  }
  return firstError();
}
