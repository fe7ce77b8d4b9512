//===- MachineFuzzer.cpp - fuzz the machine file reader -------------------===//
//
// The input is a machine file's text. An accepted machine must keep what
// CostModel.h promises (rates positive, latencies non-negative, all
// finite), or the simulated timeline divides by zero or prints NaN.
//
//===----------------------------------------------------------------------===//

#include "planner/CostModel.h"
#include "tests/fuzz/FuzzCheck.h"

#include <cmath>
#include <cstdint>
#include <string>

using namespace sharc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  Result<Machine> machine = parseMachine(text, "fuzz.yaml");
  if (!machine) {
    SHARC_FUZZ_CHECK(machine.status().exitCode() == 2,
                     "a bad machine file is bad input");
    return 0;
  }
  auto positive = [](double value) {
    return std::isfinite(value) && value > 0;
  };
  auto nonNegative = [](double value) {
    return std::isfinite(value) && value >= 0;
  };
  for (const auto &[dtype, flops] : machine->peakFlops)
    SHARC_FUZZ_CHECK(positive(flops), "peak rates are positive");
  SHARC_FUZZ_CHECK(positive(machine->memoryBandwidth),
                   "memory bandwidth is positive");
  SHARC_FUZZ_CHECK(nonNegative(machine->launchOverhead),
                   "launch overhead is non-negative");
  for (const auto &[axis, link] : machine->links) {
    SHARC_FUZZ_CHECK(positive(link.beta), "link bandwidth is positive");
    SHARC_FUZZ_CHECK(nonNegative(link.alpha), "link latency is non-negative");
  }
  return 0;
}
