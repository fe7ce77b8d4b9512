//===- FileText.cpp - whole files and YAML errors as Status ---------------===//

#include "planner/plan/FileText.h"

#include "planner/plan/HostThreads.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace sharc;

namespace {

/// "a directory" and the like for what is not a regular file; empty for one.
std::string notARegularFile(const struct stat &info) {
  if (S_ISREG(info.st_mode))
    return "";
  if (S_ISDIR(info.st_mode))
    return "a directory";
  if (S_ISFIFO(info.st_mode))
    return "a FIFO";
  if (S_ISCHR(info.st_mode) || S_ISBLK(info.st_mode))
    return "a device";
  if (S_ISSOCK(info.st_mode))
    return "a socket";
  return "not a regular file";
}

/// "'PATH'", or "WHAT 'PATH'" ("plan 'x.plan'") for messages.
std::string nameOf(const std::string &path, const std::string &what) {
  return what.empty() ? "'" + path + "'" : what + " '" + path + "'";
}

/// What is at `path` when it exists and is not a regular file ("a
/// directory"), checked before opening it: opening a FIFO would block.
std::string notAFileAt(const std::string &path) {
  struct stat info{};
  return ::stat(path.c_str(), &info) == 0 ? notARegularFile(info) : "";
}

int64_t hostMemoryBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && pageSize > 0 ? static_cast<int64_t>(pages) * pageSize
                                   : INT64_MAX;
}

} // namespace

Result<std::string> sharc::readWholeFile(const std::string &path,
                                         const std::string &what) {
  auto file = FileReader::open(path, what);
  if (!file)
    return file.status();
  int64_t size = (*file)->size();
  if (size > hostMemoryBytes())
    return Status::invalidInput(nameOf(path, what) + " holds " +
                                std::to_string(size) +
                                " bytes, more than this host's memory of " +
                                std::to_string(hostMemoryBytes()) + " bytes");
  std::string text(static_cast<size_t>(size), '\0');
  SHARC_TRY((*file)->readAt(0, text.data(), size));
  return text;
}

Status sharc::readYaml(const std::string &text, const std::string &fileName,
                       const std::function<Status(const YAML::Node &)> &read) {
  auto at = [&](const YAML::Mark &mark) {
    if (mark.is_null())
      return fileName;
    return fileName + ":" + std::to_string(mark.line + 1) + ":" +
           std::to_string(mark.column + 1);
  };
  try {
    return read(YAML::Load(text));
  } catch (const YAML::DeepRecursion &error) {
    // yaml-cpp's depth guard says only "bad file" (ErrorMsg::BAD_FILE).
    return Status::invalidInput(at(error.mark) +
                                ": nesting deeper than the YAML parser allows");
  } catch (const YAML::Exception &error) {
    return Status::invalidInput(at(error.mark) + ": " + error.msg);
  } catch (const std::exception &error) {
    return Status::invalidInput(fileName + ": " + error.what());
  }
}

Result<std::unique_ptr<AtomicFileWriter>>
AtomicFileWriter::open(const std::string &path, const std::string &what,
                       int64_t slotBytes) {
  std::string named = nameOf(path, what);
  if (std::string kind = notAFileAt(path); !kind.empty())
    return Status::invalidInput("cannot write " + named + ": it is " + kind);
  // mkstemp in the target's folder, so the rename never crosses devices.
  std::string temporary = path + ".XXXXXX";
  int fd = ::mkstemp(temporary.data());
  if (fd < 0)
    return Status::runtimeError("cannot write " + named + ": " +
                                std::strerror(errno));
  return std::unique_ptr<AtomicFileWriter>(
      new AtomicFileWriter(path, named, temporary, fd, slotBytes));
}

AtomicFileWriter::~AtomicFileWriter() {
  writes_.reset();
  if (fd_ >= 0) {
    ::close(fd_);
    std::remove(temporary_.c_str());
  }
}

Status AtomicFileWriter::fail(const std::string &reason) {
  writes_.reset();
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
  std::remove(temporary_.c_str());
  return Status::runtimeError("cannot write " + named_ + ": " + reason);
}

Status AtomicFileWriter::append(std::string_view bytes) {
  if (fd_ < 0)
    return Status::runtimeError("cannot write " + named_ +
                                ": the file is closed");
  if (Status appended = writes_->append(bytes); !appended)
    return fail(appended.message());
  return Status::ok();
}

Status AtomicFileWriter::commit() {
  if (fd_ < 0)
    return Status::runtimeError("cannot write " + named_ +
                                ": the file is closed");
  if (Status written = writes_->finish(); !written)
    return fail(written.message());
  // A new file is 0600 from mkstemp; give it what a plain create would.
  mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd_, 0666 & ~mask) != 0 || ::fsync(fd_) != 0)
    return fail(std::strerror(errno));
  int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0 || std::rename(temporary_.c_str(), path_.c_str()) != 0) {
    int error = errno;
    std::remove(temporary_.c_str());
    return Status::runtimeError("cannot write " + named_ + ": " +
                                std::strerror(error));
  }
  return Status::ok();
}

Status sharc::writeFileAtomically(const std::string &path,
                                  const std::vector<std::string_view> &pieces,
                                  const std::string &what) {
  auto file = AtomicFileWriter::open(path, what);
  if (!file)
    return file.status();
  for (std::string_view piece : pieces)
    SHARC_TRY((*file)->append(piece));
  return (*file)->commit();
}

Result<std::unique_ptr<FileReader>> FileReader::open(const std::string &path,
                                                     const std::string &what) {
  std::string named = nameOf(path, what);
  if (std::string kind = notAFileAt(path); !kind.empty())
    return Status::invalidInput(named + " is " + kind + ", not a file");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::invalidInput("cannot open " + named + ": " +
                                std::strerror(errno));
  struct stat info{};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    int error = errno;
    ::close(fd);
    return Status::invalidInput(
        "cannot read " + named + ": " +
        (S_ISREG(info.st_mode) ? std::strerror(error) : "not a file"));
  }
  return std::unique_ptr<FileReader>(
      new FileReader(named, fd, static_cast<int64_t>(info.st_size)));
}

FileReader::~FileReader() { ::close(fd_); }

namespace {
/// Reads of more than this go as pieces on several threads.
constexpr size_t kPieceBytes = size_t{16} << 20;
} // namespace

Status FileReader::readAt(int64_t offset, void *into, int64_t numBytes) const {
  // Large reads go as pieces on several threads: the page cache's copies,
  // and the faults of fresh memory, on each (reads share the file).
  size_t total = static_cast<size_t>(std::max<int64_t>(numBytes, 0));
  size_t pieces = std::min<size_t>((total + kPieceBytes - 1) / kPieceBytes, 8);
  size_t share = pieces == 0 ? 0 : (total + pieces - 1) / pieces;
  std::vector<std::string> errors(pieces);
  runShares(static_cast<int64_t>(pieces), [&](int64_t piece) {
    size_t begin = static_cast<size_t>(piece) * share;
    char *to = static_cast<char *>(into) + begin;
    int64_t at = offset + static_cast<int64_t>(begin);
    size_t left = begin < total ? std::min(share, total - begin) : 0;
    while (left > 0) {
      ssize_t got = ::pread(fd_, to, left, static_cast<off_t>(at));
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0) {
        errors[piece] =
            "cannot read " + named_ + " at byte " + std::to_string(at) + ": " +
            (got < 0 ? std::strerror(errno) : "the file ends there");
        return;
      }
      to += got;
      at += got;
      left -= static_cast<size_t>(got);
    }
  });
  for (const std::string &error : errors)
    if (!error.empty())
      return Status::runtimeError(error);
  return Status::ok();
}

bool sharc::sameFile(const std::string &a, const std::string &b) {
  struct stat first{}, second{};
  return ::stat(a.c_str(), &first) == 0 && ::stat(b.c_str(), &second) == 0 &&
         first.st_dev == second.st_dev && first.st_ino == second.st_ino;
}

sharc::Status sharc::checkWritablePath(const std::string &path,
                                       const std::string &what) {
  std::string named = what + " " + path;
  size_t slash = path.find_last_of('/');
  std::string folder = slash == std::string::npos ? "."
                       : slash == 0               ? "/"
                                                  : path.substr(0, slash);
  struct stat info{};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
    return Status::invalidInput(named + ": a folder; name a file");
  if (::stat(folder.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    return Status::invalidInput(named + ": there is no folder " + folder);
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    return Status::invalidInput(named + ": cannot create files in " + folder +
                                ": " + std::strerror(errno));
  return Status::ok();
}
