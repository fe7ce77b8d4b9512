//===- FileTextTest.cpp - whole-file reads and atomic writes --------------===//

#include "planner/plan/FileText.h"
#include "tests/unit/NoThreads.h"

#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace sharc;

namespace {

std::string tempDir() {
  std::string dir = "/tmp/sharc-filetext-XXXXXX";
  REQUIRE(::mkdtemp(dir.data()));
  return dir;
}

/// `size` bytes of a fixed pseudo-random sequence continuing from `state`.
std::string noise(size_t size, uint64_t &state) {
  std::string bytes(size, '\0');
  for (char &c : bytes) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    c = static_cast<char>(state >> 56);
  }
  return bytes;
}

/// The names in `dir` other than . and ..
std::vector<std::string> entries(const std::string &dir) {
  std::vector<std::string> names;
  DIR *handle = ::opendir(dir.c_str());
  REQUIRE(handle);
  while (dirent *entry = ::readdir(handle))
    if (std::string(entry->d_name) != "." && std::string(entry->d_name) != "..")
      names.push_back(entry->d_name);
  ::closedir(handle);
  return names;
}

} // namespace

TEST_CASE("an atomic write replaces the file and leaves no temporary",
          "[plan]") {
  std::string dir = tempDir();
  std::string path = dir + "/out.txt";
  REQUIRE(writeFileAtomically(path, {"old"}, "test file"));
  REQUIRE(writeFileAtomically(path, {"new ", "text"}, "test file"));
  auto text = readWholeFile(path, "");
  REQUIRE(text);
  REQUIRE(*text == "new text");
  REQUIRE(entries(dir) == std::vector<std::string>{"out.txt"});
  struct stat info{};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  REQUIRE((info.st_mode & 0444) == 0444); // not mkstemp's 0600
  std::remove(path.c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("large appends and reads in pieces keep the bytes in order",
          "[plan]") {
  // Small appends around large ones, read back whole (a read of more than
  // 16 MiB goes as up to 8 pieces at their offsets on several threads).
  std::string dir = tempDir();
  std::string path = dir + "/big.bin";
  std::string expected;
  {
    auto writer = AtomicFileWriter::open(path, "test file");
    REQUIRE(writer);
    uint64_t state = 12345;
    for (size_t size : {size_t{7}, size_t{40} << 20, size_t{1},
                        (size_t{130} << 20) + 3, size_t{0}, size_t{5}}) {
      std::string piece = noise(size, state);
      REQUIRE((*writer)->append(piece));
      expected += piece;
    }
    REQUIRE((*writer)->commit());
  }
  auto text = readWholeFile(path, "");
  REQUIRE(text);
  REQUIRE(text->size() == expected.size());
  REQUIRE(*text == expected);
  std::remove(path.c_str());
  ::rmdir(dir.c_str());
}

namespace {

/// Whether files in `dir` can be opened with O_DIRECT (ext4 and xfs can;
/// tmpfs could not before Linux 6.6).
bool directWorksIn(const std::string &dir) {
  std::string probe = dir + "/probe";
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_DIRECT, 0600);
  if (fd >= 0)
    ::close(fd);
  std::remove(probe.c_str());
  return fd >= 0;
}

} // namespace

TEST_CASE("a file of many slots is written past the page cache, byte exact",
          "[plan]") {
  // Slots of 8 KiB: the ends fall before, on and past slot and page
  // boundaries, and appends span several slots.
  std::string dir = tempDir();
  std::string path = dir + "/slots.bin";
  bool direct = directWorksIn(dir);
  uint64_t state = 7;
  for (size_t total :
       {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{8191},
        size_t{8192}, size_t{8193}, size_t{3 * 8192}, size_t{3 * 8192 + 4096},
        size_t{5 * 8192 + 4097}, (size_t{1} << 20) + 17}) {
    for (bool whole : {false, true}) {
      CAPTURE(total, whole);
      std::string expected = noise(total, state);
      auto writer = AtomicFileWriter::open(path, "test file", 8192);
      REQUIRE(writer);
      size_t at = 0;
      for (size_t piece : {whole ? total : 1, size_t{4097}, size_t{3000},
                           size_t{20000}, total}) {
        size_t take = std::min(piece, total - at);
        REQUIRE((*writer)->append({expected.data() + at, take}));
        at += take;
      }
      REQUIRE((*writer)->commit());
      // Less than a slot goes through the page cache whole; a full slot
      // or more, past it where the file system allows.
      REQUIRE((*writer)->wroteDirect() == (direct && total >= 8192));
      auto text = readWholeFile(path, "");
      REQUIRE(text);
      REQUIRE(*text == expected);
    }
  }
  std::remove(path.c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("a write that fails in a slot fails the file and keeps the old one",
          "[plan]") {
  // A file-size limit makes the writes past it fail with EFBIG (the signal
  // it would raise is ignored), whichever thread writes them.
  std::string dir = tempDir();
  std::string path = dir + "/limited.bin";
  REQUIRE(writeFileAtomically(path, {"old"}, "test file"));
  struct rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
  auto previous = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limited = saved;
  limited.rlim_cur = 40000;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
  uint64_t state = 11;
  std::string bytes = noise(200000, state);
  Status status = Status::ok();
  {
    auto writer = AtomicFileWriter::open(path, "test file", 8192);
    REQUIRE(writer);
    for (size_t at = 0; status && at < bytes.size(); at += 10000)
      status = (*writer)->append({bytes.data() + at, 10000});
    if (status)
      status = (*writer)->commit();
  }
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &saved) == 0);
  std::signal(SIGXFSZ, previous);
  REQUIRE_FALSE(status);
  REQUIRE(status.message() ==
          "cannot write test file '" + path + "': " + std::strerror(EFBIG));
  auto text = readWholeFile(path, "");
  REQUIRE(text);
  REQUIRE(*text == "old");
  REQUIRE(entries(dir) == std::vector<std::string>{"limited.bin"});
  std::remove(path.c_str());
  ::rmdir(dir.c_str());
}

#ifdef SHARC_NO_THREADS_TESTABLE
/// Where the capped case below writes: beside its parent's pid.
std::string cappedPath(pid_t parent) {
  return "/tmp/sharc-capped-write-" + std::to_string(parent) + ".bin";
}

/// The file the capped case writes: 100 MiB and 5 bytes of one 1 MiB
/// pattern.
std::string cappedPattern() {
  uint64_t state = 99;
  return noise(size_t{1} << 20, state);
}

TEST_CASE("a large file on a host without threads or memory for slots",
          "[.capped]") {
  // 4 MiB of room: no thread starts and no 64 MiB slot is allocated, so
  // the bytes go out through the page cache from the caller; with 8 KiB
  // slots the caller writes them itself.
  std::string pattern = cappedPattern();
  test::capThreads(4 << 20);
  std::string path = cappedPath(::getppid());
  for (int64_t slot : {int64_t{8192}, AtomicFileWriter::kSlotBytes}) {
    auto writer = AtomicFileWriter::open(path, "test file", slot);
    if (!writer)
      _exit(6);
    for (int piece = 0; piece < 100; ++piece)
      if (!(*writer)->append(pattern))
        _exit(7);
    if (!(*writer)->append(std::string_view(pattern).substr(0, 5)) ||
        !(*writer)->commit())
      _exit(8);
    if (slot == 8192 && directWorksIn("/tmp") != (*writer)->wroteDirect())
      _exit(9);
  }
  _exit(0);
}

TEST_CASE("a host without threads or memory for slots still writes a file",
          "[plan]") {
  int code = test::runInFreshProcess(
      "a large file on a host without threads or memory for slots");
  INFO("exit " << code
               << " (3: setrlimit; 4: a thread started anyway; 6-8: "
                  "open, append or commit failed; 9: O_DIRECT was or "
                  "was not used; 128 + N: signal N)");
  REQUIRE(code == 0);
  std::string path = cappedPath(::getpid());
  auto text = readWholeFile(path, "");
  std::remove(path.c_str());
  REQUIRE(text);
  std::string pattern = cappedPattern();
  REQUIRE(text->size() == 100 * pattern.size() + 5);
  for (size_t at = 0; at + pattern.size() <= text->size(); at += pattern.size())
    REQUIRE(text->compare(at, pattern.size(), pattern) == 0);
  REQUIRE(text->compare(100 * pattern.size(), 5, pattern, 0, 5) == 0);
}
#endif

TEST_CASE("an atomic write never replaces a directory or a FIFO", "[plan]") {
  std::string dir = tempDir();
  std::string sub = dir + "/sub";
  REQUIRE(::mkdir(sub.c_str(), 0755) == 0);
  Status status = writeFileAtomically(sub, {"x"}, "plan");
  REQUIRE(status.code() == Status::Code::InvalidInput);
  REQUIRE(status.message() ==
          "cannot write plan '" + sub + "': it is a directory");
  std::string fifo = dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE(writeFileAtomically(fifo, {"x"}, "").code() ==
          Status::Code::InvalidInput);
  // A folder that does not exist: an error, and nothing left behind.
  Status missing = writeFileAtomically(dir + "/none/out", {"x"}, "trace");
  REQUIRE(missing.code() == Status::Code::RuntimeError);
  REQUIRE(entries(dir).size() == 2);
  std::remove(fifo.c_str());
  ::rmdir(sub.c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("reading a directory or a FIFO names what it is", "[plan]") {
  std::string dir = tempDir();
  auto asDir = readWholeFile(dir, "plan");
  REQUIRE(asDir.status().code() == Status::Code::InvalidInput);
  REQUIRE(asDir.status().message() ==
          "plan '" + dir + "' is a directory, not a file");
  std::string fifo = dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto asFifo = readWholeFile(fifo, ""); // must not block
  REQUIRE(asFifo.status().message() == "'" + fifo + "' is a FIFO, not a file");
  REQUIRE(sameFile(dir, dir + "/."));
  REQUIRE_FALSE(sameFile(dir, fifo));
  REQUIRE_FALSE(sameFile(dir + "/none", dir + "/none"));
  std::remove(fifo.c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("deep nesting and CRLF line ends read as plain YAML errors",
          "[plan]") {
  auto readError = [](const std::string &text) {
    Status status = readYaml(text, "f.yaml", [](const YAML::Node &root) {
      return root["k"]["x"].as<int>() == 7
                 ? Status::ok()
                 : Status::invalidInput("f.yaml: x is not 7");
    });
    return status.message();
  };
  // yaml-cpp's depth guard (2000 levels) said only "bad file".
  std::string deep = "k: " + std::string(5000, '[') + std::string(5000, ']');
  REQUIRE(readError(deep) ==
          "f.yaml:1:10004: nesting deeper than the YAML parser allows");
  // Windows line ends: the same value and the same places, no stray '\r'.
  REQUIRE(readError("k:\r\n  x: 7\r\n").empty());
  REQUIRE(readError("k:\r\n  x: [7\r\n") ==
          "f.yaml:3:1: end of sequence flow not found");
}
