//===- PlanFuzzer.cpp - fuzz the plan reader, contract and report ---------===//
//
// The input is a plan file's text, read with every check (format and
// contract) as sharc-run reads it. An accepted plan must survive what
// sharc-run does before the first step (the memory report), and writing
// it must give text that reads back to the same plan: PlanIO.h promises an
// exact round trip, and a writer whose output its own reader refuses would
// strand every plan it wrote.
//
//===----------------------------------------------------------------------===//

#include "planner/MemoryReport.h"
#include "planner/plan/PlanIO.h"
#include "tests/fuzz/FuzzCheck.h"

#include <cstdint>
#include <string>

using namespace sharc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  Result<plan::Plan> parsed = plan::parsePlan(text, "fuzz.plan");
  if (!parsed) {
    SHARC_FUZZ_CHECK(parsed.status().exitCode() == 2,
                     "a bad plan is bad input");
    SHARC_FUZZ_CHECK(parsed.status().message().starts_with("fuzz.plan"),
                     "a plan error names the file");
    return 0;
  }
  MemoryReport report = buildMemoryReport(*parsed);
  SHARC_FUZZ_CHECK(report.totalBytes >= 0, "a report never counts negative");
  std::string written = plan::writePlan(*parsed);
  Result<plan::Plan> reread = plan::parsePlan(written, "written.plan");
  if (!reread)
    std::fprintf(stderr, "%s\n", reread.status().message().c_str());
  SHARC_FUZZ_CHECK(reread.isOk(), "the reader accepts what the writer wrote");
  SHARC_FUZZ_CHECK(plan::writePlan(*reread) == written,
                   "writing a plan read back gives the same text");
  return 0;
}
