//===- HostMemoryTest.cpp - MemAvailable read from a meminfo file ---------===//

#include "planner/plan/HostMemory.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <unistd.h>

using namespace sharc;

namespace {

/// A meminfo-shaped file with `text`, removed at scope exit.
struct MeminfoFile {
  std::string path;
  explicit MeminfoFile(const std::string &text) {
    path = "/tmp/sharc-meminfo-XXXXXX";
    int fd = ::mkstemp(path.data());
    REQUIRE(fd >= 0);
    ::close(fd);
    std::ofstream(path) << text;
  }
  ~MeminfoFile() { ::unlink(path.c_str()); }
};

} // namespace

TEST_CASE("MemAvailable is read in bytes from its line", "[plan]") {
  MeminfoFile file("MemTotal:       24576000 kB\n"
                   "MemFree:          123456 kB\n"
                   "MemAvailable:   20000000 kB\n"
                   "Buffers:            1024 kB\n");
  REQUIRE(memAvailableBytes(file.path) == int64_t{20000000} * 1024);
}

TEST_CASE("a meminfo without MemAvailable says it does not know", "[plan]") {
  MeminfoFile old("MemTotal:       24576000 kB\nMemFree: 123456 kB\n");
  REQUIRE(memAvailableBytes(old.path) == -1);
  MeminfoFile garbled("MemAvailable: lots\n");
  REQUIRE(memAvailableBytes(garbled.path) == -1);
  REQUIRE(memAvailableBytes("/nonexistent/meminfo") == -1);
}

TEST_CASE("this host's MemAvailable is a positive size", "[plan]") {
  // Linux has had the line since 3.14; CI and the GPU nodes run newer.
  REQUIRE(memAvailableBytes() > 0);
}
