//===- DirectWrites.h - large files past the page cache --------*- C++ -*-===//
// defines: DirectWrites
//
// A checkpoint of a large model is written at the disk's speed only when
// its bytes skip the page cache. Measured on the GPU node (ext4 on a
// virtual disk, 8 GiB each, .device/call1.sh of the twenty-fifth session):
// buffered writes and an fsync 1.1-1.2 GB/s; O_DIRECT from one writer 1.7
// GB/s, from two at once 2.4-2.5, from four 2.0. So the bytes are copied
// into page-aligned slots, and two threads write full slots with O_DIRECT
// at their offsets while the caller fills the next one. What is left at
// the end is written the same way up to its last whole page, and the
// sub-page tail through the ordinary descriptor, so the file has exactly
// the bytes appended. A file of less than 1 MiB and less than a slot
// (plans, traces, small checkpoints) is written with one ordinary write; a
// file system that refuses O_DIRECT (tmpfs, some network file systems), or
// a host without the memory for a slot, gets ordinary writes throughout,
// and a host that starts no thread gets the slots written by the caller.
//
//   DirectWrites writes(path, fd, slotBytes);
//   writes.append(bytes) ...; writes.finish();  // then fsync fd
#pragma once

#include "planner/plan/Status.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace sharc {

class DirectWrites {
public:
  /// O_DIRECT's alignment of memory, offsets and sizes (a page; enough for
  /// the logical blocks of every disk seen).
  static constexpr int64_t kAlign = 4096;

  /// Appends go to the file at `path`, open for writing as `fd` (kept
  /// open by the caller; a second descriptor with O_DIRECT is opened here
  /// where the file system allows it). `slotBytes` is rounded up to
  /// kAlign.
  DirectWrites(const std::string &path, int fd, int64_t slotBytes);
  ~DirectWrites();
  DirectWrites(const DirectWrites &) = delete;
  DirectWrites &operator=(const DirectWrites &) = delete;

  /// A failed write, which may be an earlier slot's: the errno's text.
  Status append(std::string_view bytes);
  /// Writes what is left and waits for the writers; the file then holds
  /// every appended byte (not yet flushed to disk: the caller's fsync).
  Status finish();
  /// Whether any slot went out through O_DIRECT (for tests).
  bool wroteDirect() const { return wroteDirect_; }

private:
  struct Slot {
    char *bytes = nullptr;
    int64_t used = 0, offset = 0;
  };
  Status appendToSlots(std::string_view bytes);
  /// Writes `bytes` at the file's end through the page cache, here.
  Status writeOrdinary(std::string_view bytes);
  /// Hands the current slot to a writer (or writes it here when no
  /// writer thread could start) and takes a free one.
  Status submit();
  /// Writes `slot.used` bytes at `slot.offset`: the whole pages with
  /// O_DIRECT where allowed, the rest ordinarily.
  Status writeSlot(const Slot &slot);
  void writerLoop();
  Status firstError();

  int fd_, directFd_ = -1;
  int64_t slotBytes_;
  std::vector<std::unique_ptr<char, void (*)(void *)>> storage_;
  std::string head_; ///< the bytes before the first slot is taken
  /// No O_DIRECT descriptor, or no memory for a slot: every append goes
  /// straight through the page cache.
  bool ordinary_ = false;
  Slot current_;
  int64_t offset_ = 0;
  /// Set by the writer threads; direct off once the file system refused.
  std::atomic<bool> wroteDirect_{false}, directRefused_{false};

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Slot> queued_;
  std::vector<char *> free_;
  int busy_ = 0;
  bool stopping_ = false;
  std::string error_;
  std::vector<std::thread> writers_;
};

} // namespace sharc
