//===- FileText.cpp - whole files and YAML errors as Status ---------------===//

#include "planner/plan/FileText.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

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

int64_t hostMemoryBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && pageSize > 0 ? static_cast<int64_t>(pages) * pageSize
                                   : INT64_MAX;
}

} // namespace

Result<std::string> sharc::readWholeFile(const std::string &path,
                                         const std::string &what) {
  std::string named =
      what.empty() ? "'" + path + "'" : what + " '" + path + "'";
  // Checked before opening: opening a FIFO would block.
  struct stat info{};
  if (::stat(path.c_str(), &info) == 0) {
    std::string kind = notARegularFile(info);
    if (!kind.empty())
      return Status::invalidInput(named + " is " + kind + ", not a file");
    if (static_cast<int64_t>(info.st_size) > hostMemoryBytes())
      return Status::invalidInput(named + " holds " +
                                  std::to_string(info.st_size) +
                                  " bytes, more than this host's memory of " +
                                  std::to_string(hostMemoryBytes()) + " bytes");
  }
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return Status::invalidInput("cannot open " + named + ": " +
                                std::strerror(errno));
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad())
    return Status::runtimeError("cannot read " + named);
  return text.str();
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

Status sharc::writeFileAtomically(const std::string &path,
                                  const std::vector<std::string_view> &pieces,
                                  const std::string &what) {
  std::string named =
      what.empty() ? "'" + path + "'" : what + " '" + path + "'";
  struct stat info{};
  if (::stat(path.c_str(), &info) == 0) {
    std::string kind = notARegularFile(info);
    if (!kind.empty())
      return Status::invalidInput("cannot write " + named + ": it is " + kind);
  }
  // mkstemp in the target's folder, so the rename never crosses devices.
  std::string temporary = path + ".XXXXXX";
  int fd = ::mkstemp(temporary.data());
  if (fd < 0)
    return Status::runtimeError("cannot write " + named + ": " +
                                std::strerror(errno));
  auto failWith = [&](const std::string &reason) {
    ::close(fd);
    std::remove(temporary.c_str());
    return Status::runtimeError("cannot write " + named + ": " + reason);
  };
  for (std::string_view piece : pieces) {
    const char *data = piece.data();
    size_t left = piece.size();
    while (left > 0) {
      ssize_t written = ::write(fd, data, left);
      if (written < 0 && errno == EINTR)
        continue;
      if (written <= 0)
        return failWith(std::strerror(errno));
      data += written;
      left -= static_cast<size_t>(written);
    }
  }
  // A new file is 0600 from mkstemp; give it what a plain create would.
  mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0 || ::fsync(fd) != 0)
    return failWith(std::strerror(errno));
  if (::close(fd) != 0) {
    std::remove(temporary.c_str());
    return Status::runtimeError("cannot write " + named + ": " +
                                std::strerror(errno));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    int error = errno;
    std::remove(temporary.c_str());
    return Status::runtimeError("cannot write " + named + ": " +
                                std::strerror(error));
  }
  return Status::ok();
}

bool sharc::sameFile(const std::string &a, const std::string &b) {
  struct stat first{}, second{};
  return ::stat(a.c_str(), &first) == 0 && ::stat(b.c_str(), &second) == 0 &&
         first.st_dev == second.st_dev && first.st_ino == second.st_ino;
}
