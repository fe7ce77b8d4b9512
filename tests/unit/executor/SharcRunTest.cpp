//===- SharcRunTest.cpp - the sharc-run tool end to end -------------------===//
//
// Writes a hand-built plan to a file and runs the built sharc-run on it,
// checking its output lines, files and exit codes.

#include "executor/Runtime.h"
#include "planner/plan/PlanIO.h"

#include "TestPlans.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>

using namespace sharc;
using namespace sharc::exec::test;

namespace {
struct ToolRun {
  int exitCode = -1;
  std::string out; ///< stdout and stderr together
};

ToolRun runTool(const std::string &args) {
  std::string command =
      std::string(SHARC_BINARY_DIR) + "/bin/sharc-run " + args + " 2>&1";
  ToolRun run;
  FILE *pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe);
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe))
    run.out.append(buffer, n);
  int status = ::pclose(pipe);
  run.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

std::string tempPath(const std::string &stem) {
  return "/tmp/sharc-run-test-" + std::to_string(::getpid()) + "-" + stem;
}

size_t count(const std::string &text, const std::string &word) {
  size_t found = 0;
  for (size_t at = text.find(word); at != std::string::npos;
       at = text.find(word, at + 1))
    ++found;
  return found;
}
} // namespace

TEST_CASE("sharc-run trains a plan and reports every step", "[executor]") {
  LinearModel model;
  std::string planPath = tempPath("plan.yaml");
  std::string dumpPath = tempPath("outputs.safetensors");
  std::string savePath = tempPath("ckpt.safetensors");
  REQUIRE(plan::writePlanFile(makeLinearPlan(model, 2, 2), planPath));

  ToolRun run = runTool(planPath + " --steps 3 --seed 1 --dump-outputs " +
                        dumpPath + " --save " + savePath);
  INFO(run.out);
  REQUIRE(run.exitCode == 0);
  REQUIRE(count(run.out, "step    ") == 3);
  REQUIRE(run.out.find("step    3  loss ") != std::string::npos);
  REQUIRE(run.out.find("3 steps  first loss") != std::string::npos);

  auto outputs = plan::readSafeTensors(dumpPath);
  REQUIRE(outputs);
  const plan::NamedTensor *grad = outputs->find("grad:head.weight");
  REQUIRE(grad);
  REQUIRE(grad->dtype == DType::F32);
  REQUIRE(grad->shape == std::vector<int64_t>{8, 4});
  REQUIRE(outputs->find("loss"));
  REQUIRE(outputs->find("logits"));

  // Resuming continues the step count.
  ToolRun resumed = runTool(planPath + " --steps 1 --quiet --load " + savePath);
  INFO(resumed.out);
  REQUIRE(resumed.exitCode == 0);
  REQUIRE(resumed.out.find("step    4") == std::string::npos); // --quiet
  REQUIRE(resumed.out.find("1 steps") != std::string::npos);

  std::remove(planPath.c_str());
  std::remove(dumpPath.c_str());
  std::remove(savePath.c_str());
}

TEST_CASE("sharc-run rejects bad input with exit status 2", "[executor]") {
  LinearModel model;
  std::string planPath = tempPath("plan2.yaml");
  REQUIRE(plan::writePlanFile(makeLinearPlan(model, 1, 1), planPath));

  ToolRun cuda = runTool(planPath + " --backend cuda");
  REQUIRE(cuda.exitCode == 2);
  REQUIRE(cuda.out == "sharc-run: error: cuda backend not built yet\n");
  REQUIRE(runTool(planPath + " --steps many").exitCode == 2);
  REQUIRE(runTool(planPath + " --frobnicate").exitCode == 2);
  REQUIRE(runTool("").exitCode == 2);
  ToolRun noPlan = runTool(planPath + ".missing");
  REQUIRE(noPlan.exitCode == 2);
  REQUIRE(noPlan.out.rfind("sharc-run: error: ", 0) == 0);
  ToolRun noCheckpoint = runTool(planPath + " --load " + planPath);
  REQUIRE(noCheckpoint.exitCode == 2);
  std::remove(planPath.c_str());
}
