//===- FileText.h - whole files and YAML errors as Status -------*- C++ -*-===//
// defines: readWholeFile, readYaml, writeFileAtomically, AtomicFileWriter,
//          FileReader, sameFile
//
// The runtime-side readers (plans, machine files, token files) read a file
// whole and turn yaml-cpp's exceptions into FILE:LINE:COL messages; the
// writers (plans, checkpoints, traces) all replace a file atomically. A
// safetensors file (a checkpoint of a large model can be larger than the
// host's memory) is read and written a piece at a time instead
// (FileReader, AtomicFileWriter).
#pragma once

#include "planner/plan/DirectWrites.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace YAML {
class Node;
} // namespace YAML

namespace sharc {

/// The file's bytes; a file that cannot be opened, a directory, a FIFO or a
/// device, or a file larger than this host's memory is bad input (`what`,
/// when not empty, names it in the message: "plan", "machine file"), a
/// failed read a runtime error.
Result<std::string> readWholeFile(const std::string &path,
                                  const std::string &what);

/// Parses `text` as YAML and hands the root to `read`. yaml-cpp throws; this
/// is where its exceptions become "FILE:LINE:COL: message" (its marks count
/// from 0) as bad input, so no reader needs a try block of its own.
Status readYaml(const std::string &text, const std::string &fileName,
                const std::function<Status(const YAML::Node &)> &read);

/// Writes the concatenated `pieces` to `path` through a temporary file in
/// the same folder that is flushed to disk and then renamed over `path`:
/// a full disk or a kill leaves the old file whole, and a failure removes
/// the temporary. Something at `path` that is not a regular file (a
/// directory, a FIFO, a device) is never replaced: bad input.
Status writeFileAtomically(const std::string &path,
                           const std::vector<std::string_view> &pieces,
                           const std::string &what);

/// A file written a piece at a time through a temporary beside `path`
/// that commit() flushes and renames over it: writeFileAtomically for a
/// file too large to hold in memory at once (a checkpoint). Destroyed
/// before commit(), or after a failed append, it removes the temporary and
/// leaves whatever was at `path` whole. A file of more than `slotBytes`
/// goes to disk past the page cache (DirectWrites).
class AtomicFileWriter {
public:
  /// Bytes staged per O_DIRECT write (planner/plan/DirectWrites.h).
  static constexpr int64_t kSlotBytes = int64_t{64} << 20;

  /// Errors as writeFileAtomically's.
  static Result<std::unique_ptr<AtomicFileWriter>>
  open(const std::string &path, const std::string &what,
       int64_t slotBytes = kSlotBytes);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter &) = delete;
  AtomicFileWriter &operator=(const AtomicFileWriter &) = delete;

  Status append(std::string_view bytes);
  Status commit();
  /// Whether some of the bytes went to disk past the page cache.
  bool wroteDirect() const { return writes_ && writes_->wroteDirect(); }

private:
  AtomicFileWriter(std::string path, std::string named, std::string temporary,
                   int fd, int64_t slotBytes)
      : path_(std::move(path)), named_(std::move(named)),
        temporary_(std::move(temporary)), fd_(fd),
        writes_(std::make_unique<DirectWrites>(temporary_, fd, slotBytes)) {}
  /// Closes and removes the temporary; the error names the file.
  Status fail(const std::string &reason);

  std::string path_, named_, temporary_;
  int fd_;                               ///< -1 once closed
  std::unique_ptr<DirectWrites> writes_; ///< reset before fd_ closes
};

/// A regular file read at offsets, a piece at a time.
class FileReader {
public:
  /// Errors as readWholeFile's, without its host-memory bound.
  static Result<std::unique_ptr<FileReader>> open(const std::string &path,
                                                  const std::string &what);
  ~FileReader();
  FileReader(const FileReader &) = delete;
  FileReader &operator=(const FileReader &) = delete;

  int64_t size() const { return size_; }
  /// Reads [offset, offset + numBytes) into `into`; a short or failed read
  /// is a runtime error.
  Status readAt(int64_t offset, void *into, int64_t numBytes) const;

private:
  FileReader(std::string named, int fd, int64_t size)
      : named_(std::move(named)), fd_(fd), size_(size) {}

  std::string named_;
  int fd_;
  int64_t size_;
};

/// Whether two paths name one existing file (same device and inode), so
/// that an output can be refused when it would overwrite an input.
bool sameFile(const std::string &a, const std::string &b);

/// Invalid input ("WHAT PATH: ...") unless a file can be written at `path`:
/// its folder exists and takes new files (writers put a file beside its
/// name and rename it onto it) and `path` is no folder. Checked before a
/// long run, which must not end in a write that could never succeed.
Status checkWritablePath(const std::string &path, const std::string &what);

} // namespace sharc
