//===- HostMemory.cpp - how much memory this host has available -----------===//

#include "planner/plan/HostMemory.h"

#include <fstream>
#include <sstream>

namespace sharc {

int64_t memAvailableBytes(const std::string &meminfoPath) {
  std::ifstream meminfo(meminfoPath);
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key, unit;
    int64_t kib = -1;
    if (fields >> key >> kib >> unit && key == "MemAvailable:" &&
        unit == "kB" && kib >= 0)
      return kib * 1024;
  }
  return -1;
}

} // namespace sharc
