//===- FileTextTest.cpp - whole-file reads and atomic writes --------------===//

#include "planner/plan/FileText.h"

#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <dirent.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace sharc;

namespace {

std::string tempDir() {
  std::string dir = "/tmp/sharc-filetext-XXXXXX";
  REQUIRE(::mkdtemp(dir.data()));
  return dir;
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
      std::string piece(size, '\0');
      for (char &c : piece) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        c = static_cast<char>(state >> 56);
      }
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
