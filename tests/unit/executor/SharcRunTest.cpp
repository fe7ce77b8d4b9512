//===- SharcRunTest.cpp - the sharc-run tool end to end -------------------===//
//
// Writes a hand-built plan to a file and runs the built sharc-run on it,
// checking its output lines, files and exit codes.

#include "executor/Runtime.h"
#include "planner/plan/PlanIO.h"
#include "planner/plan/SafeTensors.h"

#include "TestPlans.h"

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
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

  ToolRun unknown = runTool(planPath + " --backend tpu");
  REQUIRE(unknown.exitCode == 2);
  REQUIRE(unknown.out == "sharc-run: error: unknown backend 'tpu' (expected "
                         "auto, cpu or cuda)\n");
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

TEST_CASE("sharc-run --check runs an ordered two-stream plan and rejects "
          "a racy one",
          "[executor][streams]") {
  LinearModel model;
  plan::Plan async = withAsyncCollectives(makeLinearPlan(model, 2, 2));
  std::string planPath = tempPath("async.yaml");
  REQUIRE(plan::writePlanFile(async, planPath));
  ToolRun ordered = runTool(planPath + " --check --steps 2 --quiet");
  INFO(ordered.out);
  REQUIRE(ordered.exitCode == 0);
  REQUIRE(
      ordered.out.find("check: " + std::to_string(async.instructions.size()) +
                       " instructions on 2 streams, no ordering "
                       "hazards\n") != std::string::npos);
  REQUIRE(ordered.out.find("2 steps") != std::string::npos);

  // The embedding gradient no longer waits for the tp all_reduce of dx.
  plan::Plan racy = async;
  int64_t consumer = -1;
  for (size_t i = 0; i < racy.instructions.size(); ++i)
    if (racy.instructions[i].op == "embedding_grad")
      consumer = static_cast<int64_t>(i);
  REQUIRE(consumer >= 0);
  REQUIRE(racy.instructions[consumer].waits.size() == 1);
  racy.instructions[consumer].waits.clear();
  REQUIRE(plan::writePlanFile(racy, planPath));
  ToolRun hazard = runTool(planPath + " --check");
  INFO(hazard.out);
  REQUIRE(hazard.exitCode == 1);
  REQUIRE(hazard.out.rfind("sharc-run: error: " + planPath + ": hazard: ", 0) ==
          0);
  REQUIRE(hazard.out.find("(all_reduce) on stream 1 writes 'dx'") !=
          std::string::npos);
  REQUIRE(hazard.out.find("instr " + std::to_string(consumer) +
                          " (embedding_grad) on stream 0 reads 'dx'") !=
          std::string::npos);
  // Without --check the racy plan is accepted.
  REQUIRE(runTool(planPath + " --steps 1 --quiet").exitCode == 0);

  plan::Plan stuck = async;
  stuck.numEvents += 1;
  stuck.instructions[consumer].waits = {stuck.numEvents - 1};
  REQUIRE(plan::writePlanFile(stuck, planPath));
  ToolRun never = runTool(planPath);
  INFO(never.out);
  REQUIRE(never.exitCode == 2);
  REQUIRE(
      never.out.find("waits for event " + std::to_string(stuck.numEvents - 1) +
                     ", which no instruction signals") != std::string::npos);
  std::remove(planPath.c_str());
}

TEST_CASE("sharc-run --trace writes a Chrome trace of the last step",
          "[executor][trace]") {
  LinearModel model;
  plan::Plan async = withAsyncCollectives(makeLinearPlan(model, 1, 2));
  std::string planPath = tempPath("trace-plan.yaml");
  std::string tracePath = tempPath("trace.json");
  REQUIRE(plan::writePlanFile(async, planPath));
  ToolRun run = runTool(planPath + " --steps 2 --quiet --trace " + tracePath);
  INFO(run.out);
  REQUIRE(run.exitCode == 0);
  YAML::Node root;
  REQUIRE_NOTHROW(root = YAML::LoadFile(tracePath));
  REQUIRE(root["otherData"]["step"].as<int64_t>() == 2);
  size_t spans = 0;
  for (const YAML::Node &event : root["traceEvents"])
    spans += event["ph"].as<std::string>() == "X";
  REQUIRE(spans == 2 * async.instructions.size()); // two ranks

  ToolRun noSteps = runTool(planPath + " --steps 0 --trace " + tracePath);
  REQUIRE(noSteps.exitCode == 2);
  REQUIRE(noSteps.out == "sharc-run: error: --trace needs --steps >= 1\n");
  ToolRun noDir =
      runTool(planPath + " --steps 1 --quiet --trace /nonexistent/t.json");
  INFO(noDir.out);
  // Refused before the run, not after it.
  REQUIRE(noDir.exitCode == 2);
  REQUIRE(noDir.out == "sharc-run: error: --trace /nonexistent/t.json: there "
                       "is no folder /nonexistent\n");
  std::remove(planPath.c_str());
  std::remove(tracePath.c_str());
}

TEST_CASE("sharc-run stops a diverged run and saves nothing from it",
          "[executor]") {
  LinearModel model;
  std::string planPath = tempPath("diverge-plan.yaml");
  std::string goodPath = tempPath("good.safetensors");
  std::string nanPath = tempPath("nan.safetensors");
  std::string savePath = tempPath("after-nan.safetensors");
  REQUIRE(plan::writePlanFile(makeLinearPlan(model, 1, 1), planPath));
  REQUIRE(
      runTool(planPath + " --steps 1 --quiet --save " + goodPath).exitCode ==
      0);
  // The same checkpoint with one weight turned into NaN.
  auto checkpoint = plan::readSafeTensors(goodPath);
  REQUIRE(checkpoint);
  plan::NamedTensor *head = nullptr;
  for (plan::NamedTensor &tensor : checkpoint->tensors)
    if (tensor.name == "head.weight")
      head = &tensor;
  REQUIRE(head);
  REQUIRE(head->dtype == DType::F32);
  float nan = std::nanf("");
  std::memcpy(head->bytes.data(), &nan, sizeof(nan));
  REQUIRE(plan::writeSafeTensors(nanPath, *checkpoint));

  ToolRun run = runTool(planPath + " --steps 3 --load " + nanPath + " --save " +
                        savePath);
  INFO(run.out);
  REQUIRE(run.exitCode == 1);
  REQUIRE(run.out.find("sharc-run: error: the loss of step 2 is nan: the run "
                       "diverged; nothing was saved") != std::string::npos);
  REQUIRE(::access(savePath.c_str(), F_OK) != 0);

  // Without a step, the save itself finds the NaN on its way to disk and
  // leaves the file that was there as it was.
  {
    std::ofstream(savePath) << "an older file";
  }
  ToolRun saved = runTool(planPath + " --steps 0 --load " + nanPath +
                          " --save " + savePath);
  INFO(saved.out);
  REQUIRE(saved.exitCode == 1);
  REQUIRE(saved.out.find("sharc-run: error: step 1: parameter 'head.weight' "
                         "holds nan: the run diverged; nothing was saved") !=
          std::string::npos);
  std::ifstream older(savePath);
  std::string text((std::istreambuf_iterator<char>(older)),
                   std::istreambuf_iterator<char>());
  REQUIRE(text == "an older file");
  std::remove(savePath.c_str());
  for (const std::string &path : {planPath, goodPath, nanPath})
    std::remove(path.c_str());
}

TEST_CASE("sharc-run stops when the gradient norm overflows, loss finite",
          "[executor]") {
  LinearModel model;
  std::string planPath = tempPath("gnorm-plan.yaml");
  std::string goodPath = tempPath("gnorm-good.safetensors");
  std::string hugePath = tempPath("gnorm-huge.safetensors");
  REQUIRE(plan::writePlanFile(makeLinearPlan(model, 1, 1), planPath));
  REQUIRE(
      runTool(planPath + " --steps 1 --quiet --save " + goodPath).exitCode ==
      0);
  // Row 0 of the head at 1e30: logits near 1e30 keep the loss finite
  // (about 1e30), but dx and the embedding gradient reach 1e30 too, whose
  // squares overflow f32: AdamW's v becomes inf and freezes the weights.
  auto checkpoint = plan::readSafeTensors(goodPath);
  REQUIRE(checkpoint);
  for (plan::NamedTensor &tensor : checkpoint->tensors)
    if (tensor.name == "head.weight")
      for (int64_t i = 0; i < model.hidden; ++i) {
        float huge = 1e30f;
        std::memcpy(tensor.bytes.data() + 4 * i, &huge, sizeof(huge));
      }
  REQUIRE(plan::writeSafeTensors(hugePath, *checkpoint));
  // Caught at the step itself (the checkpoint holds step 1), although its
  // loss is finite.
  ToolRun lossOnly =
      runTool(planPath + " --steps 1 --load " + hugePath + " --backend cpu");
  INFO(lossOnly.out);
  REQUIRE(lossOnly.exitCode == 1);
  REQUIRE(lossOnly.out.find("sharc-run: error: step 2: the gradient norm is "
                            "not finite (AdamW moment '") != std::string::npos);
  REQUIRE(lossOnly.out.find("' holds inf): the run diverged; nothing was "
                            "saved") != std::string::npos);

  // --save onto the good checkpoint keeps it byte for byte.
  auto goodBefore = plan::readSafeTensors(goodPath);
  ToolRun run = runTool(planPath + " --steps 3 --load " + hugePath +
                        " --save " + goodPath);
  INFO(run.out);
  REQUIRE(run.exitCode == 1);
  REQUIRE(run.out.find("step 2: the gradient norm is not finite") !=
          std::string::npos);
  auto goodAfter = plan::readSafeTensors(goodPath);
  REQUIRE(goodAfter);
  REQUIRE(goodAfter->metadata == goodBefore->metadata);
  for (size_t i = 0; i < goodBefore->tensors.size(); ++i)
    REQUIRE(goodAfter->tensors[i].bytes == goodBefore->tensors[i].bytes);
  for (const std::string &path : {planPath, goodPath, hugePath})
    std::remove(path.c_str());
}

TEST_CASE("sharc-run refuses counts that would wrap and flags a mode ignores",
          "[executor]") {
  LinearModel model;
  std::string planPath = tempPath("flags-plan.yaml");
  REQUIRE(plan::writePlanFile(makeLinearPlan(model, 1, 1), planPath));
  for (const char *flags :
       {" --steps 18446744073709551617", " --steps -1", " --seed +3",
        " --steps 100000001", " --validate --load x.safetensors",
        " --compare-cpu --save x.safetensors", " --validate --data x.tokens",
        " --steps 1 --save PLAN", " --steps 1 --trace PLAN"}) {
    std::string args = flags;
    if (size_t at = args.find("PLAN"); at != std::string::npos)
      args.replace(at, 4, planPath);
    ToolRun run = runTool(planPath + args);
    INFO(args << ": " << run.out);
    REQUIRE(run.exitCode == 2);
    REQUIRE(run.out.rfind("sharc-run: error: ", 0) == 0);
  }
  // Validation would run without them; refused before any plan is read.
  for (const char *flags : {" --validate --check", " --compare-cpu --poison",
                            " --validate --timeout 5"}) {
    ToolRun run = runTool(planPath + flags);
    INFO(flags << ": " << run.out);
    REQUIRE(run.exitCode == 2);
    REQUIRE(run.out.find(" does not apply to --") != std::string::npos);
  }
  // The refused outputs left the plan whole.
  REQUIRE(plan::readPlanFile(planPath));
  std::remove(planPath.c_str());
}

namespace {
/// The ids after "sample B:" in sharc-run's output.
std::vector<int32_t> sampleIds(const std::string &out, int b) {
  std::string tag = "sample " + std::to_string(b) + ":";
  size_t at = out.find(tag);
  REQUIRE(at != std::string::npos);
  std::vector<int32_t> ids;
  const char *text = out.c_str() + at + tag.size();
  while (*text == ' ') {
    char *end = nullptr;
    ids.push_back(static_cast<int32_t>(std::strtol(text, &end, 10)));
    text = end;
  }
  return ids;
}
} // namespace

TEST_CASE("sharc-run --generate continues a prompt with the trained model's "
          "most likely tokens",
          "[executor]") {
  // The linear plan is a bigram model: the logits at a position are head x
  // embed[its token], so the greedy continuation of a token is the argmax
  // of that product over the valid vocabulary, computed here from the
  // checkpoint's tensors.
  LinearModel model;
  model.validVocab = 6; // columns 6 and 7 are padding, never drawn
  std::string planPath = tempPath("gen-plan.yaml");
  std::string savePath = tempPath("gen-ckpt.safetensors");
  REQUIRE(plan::writePlanFile(makeLinearPlan(model, 2, 1), planPath));
  ToolRun train = runTool(planPath + " --steps 3 --seed 5 --save " + savePath);
  INFO(train.out);
  REQUIRE(train.exitCode == 0);
  auto checkpoint = plan::readSafeTensors(savePath);
  REQUIRE(checkpoint);
  std::vector<double> embed =
      plan::tensorAsDoubles(*checkpoint->find("embed.weight"));
  std::vector<double> head =
      plan::tensorAsDoubles(*checkpoint->find("head.weight"));
  auto next = [&](int32_t token) {
    int32_t best = 0;
    double bestLogit = -INFINITY;
    for (int32_t v = 0; v < model.validVocab; ++v) {
      double logit = 0;
      for (int64_t h = 0; h < model.hidden; ++h)
        logit += head[v * model.hidden + h] * embed[token * model.hidden + h];
      if (logit > bestLogit) {
        bestLogit = logit;
        best = v;
      }
    }
    return best;
  };
  // Seven new tokens after two: the window of five slides.
  ToolRun run = runTool(planPath + " --load " + savePath +
                        " --generate 4,1 --max-new-tokens 7 --temperature 0");
  INFO(run.out);
  REQUIRE(run.exitCode == 0);
  REQUIRE(count(run.out, "\ntoken ") == 7);
  std::vector<int32_t> expected;
  for (int32_t token = 1; expected.size() < 7;)
    expected.push_back(token = next(token));
  // Every batch row (two dp ranks' each) is one greedy sample: the same.
  for (int b = 0; b < model.batch; ++b)
    REQUIRE(sampleIds(run.out, b) == expected);

  // Sampled: the same seed draws the same ids, rows differ, ids stay valid.
  std::string sampled = planPath + " --load " + savePath +
                        " --generate 2 --max-new-tokens 12 --temperature 2 "
                        "--top-k 0 --seed 9 --quiet"; // no timings
  ToolRun first = runTool(sampled), second = runTool(sampled);
  INFO(first.out);
  REQUIRE(first.exitCode == 0);
  REQUIRE(second.out == first.out);
  std::vector<std::vector<int32_t>> rows;
  for (int b = 0; b < model.batch; ++b) {
    rows.push_back(sampleIds(first.out, b));
    REQUIRE(rows.back().size() == 12);
    for (int32_t id : rows.back())
      REQUIRE((id >= 0 && id < model.validVocab));
  }
  REQUIRE(rows[0] != rows[1]);

  // Refused: a plan without logits, a prompt outside the vocabulary,
  // training flags, sampling flags without a prompt.
  plan::Plan noLogits = makeLinearPlan(model, 1, 1);
  std::erase_if(noLogits.outputs, [](const plan::IoEntry &entry) {
    return entry.name == "logits";
  });
  std::string noLogitsPath = tempPath("gen-nologits.yaml");
  REQUIRE(plan::writePlanFile(noLogits, noLogitsPath));
  ToolRun refused = runTool(noLogitsPath + " --generate 1");
  INFO(refused.out);
  REQUIRE(refused.exitCode == 2);
  REQUIRE(refused.out.find("--emit-logits") != std::string::npos);
  for (const char *flags :
       {" --generate 6", " --generate 1,x", " --generate 1 --steps 2",
        " --generate 1 --data x.tokens", " --generate 1 --temperature -1",
        " --generate 1 --temperature nan", " --top-k 3",
        " --generate 1 --max-new-tokens 0", " --generate 1 --top-p 0",
        " --generate 1 --top-p 1.5", " --top-p 0.9", " --stop-id 3",
        " --generate 1 --stop-id x", " --generate 1 --stop-id 1,2",
        " --generate 1 --stop-id 8", " --generate 1 --generate 2 --generate 3",
        " --warmup 2", " --generate 1 --warmup -1",
        " --generate 1 --warmup 1001"}) {
    ToolRun bad = runTool(planPath + flags);
    INFO(flags << ": " << bad.out);
    REQUIRE(bad.exitCode == 2);
    REQUIRE(bad.out.rfind("sharc-run: error: ", 0) == 0);
  }
  for (const std::string &path : {planPath, savePath, noLogitsPath})
    std::remove(path.c_str());
}
