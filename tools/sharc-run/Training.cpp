//===- Training.cpp - sharc-run's evaluation and checkpoint rotation ------===//

#include "tools/sharc-run/Training.h"

#include "executor/Checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sys/stat.h>

namespace sharc::training {

double baseLearningRate(const plan::Plan &plan) {
  for (const plan::Instruction &instr : plan.instructions)
    if (instr.op == "adamw" || instr.op == "adamw_master")
      return instr.getFloat("lr");
  return -1.0;
}

Result<EvalResult> evaluate(exec::Runtime &runtime,
                            const exec::DataLoader &data, int64_t maxBatches) {
  // Whole batches of distinct windows: wrapping would count text twice.
  int64_t available =
      std::max<int64_t>(1, data.numWindows() / data.batchSize());
  EvalResult result;
  result.batches = std::min(maxBatches, available);
  double sum = 0.0;
  for (int64_t b = 0; b < result.batches; ++b) {
    SHARC_TRY(runtime.setBatch(data.batchAt(b * data.batchSize())));
    auto loss = runtime.evalLoss();
    if (!loss)
      return loss.status();
    sum += *loss;
  }
  result.loss = sum / static_cast<double>(result.batches);
  result.tokens = result.batches * data.tokensPerBatch();
  return result;
}

std::string formatEval(int64_t step, const EvalResult &result) {
  char line[160];
  std::snprintf(line, sizeof(line),
                "eval step %4lld  val loss %.5f  ppl %.2f  (%lld batches, "
                "%lld tokens)",
                static_cast<long long>(step), result.loss,
                std::exp(result.loss), static_cast<long long>(result.batches),
                static_cast<long long>(result.tokens));
  return line;
}

std::string formatCheckpointLine(const char *verb, const std::string &path,
                                 double seconds) {
  struct stat info{};
  double bytes =
      ::stat(path.c_str(), &info) == 0 ? static_cast<double>(info.st_size) : 0;
  char numbers[96];
  if (bytes < 1e9)
    std::snprintf(numbers, sizeof(numbers), " (%.1f MB in %.1f s)", bytes / 1e6,
                  seconds);
  else
    std::snprintf(numbers, sizeof(numbers), " (%.2f GB in %.1f s, %.2f GB/s)",
                  bytes / 1e9, seconds, bytes / 1e9 / std::max(seconds, 1e-9));
  return std::string(verb) + " " + path + numbers;
}

std::string rotatingCheckpointPath(const std::string &savePath, int64_t step) {
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), "-step%06lld",
                static_cast<long long>(step));
  const std::string extension = ".safetensors";
  if (savePath.size() > extension.size() &&
      savePath.compare(savePath.size() - extension.size(), extension.size(),
                       extension) == 0)
    return savePath.substr(0, savePath.size() - extension.size()) + suffix +
           extension;
  return savePath + suffix;
}

Result<std::string> CheckpointRotation::save(const exec::Runtime &runtime,
                                             int64_t dataPosition,
                                             exec::DataOrder dataOrder) {
  std::string path = rotatingCheckpointPath(savePath_, runtime.nextStep() - 1);
  SHARC_TRY(exec::saveCheckpoint(runtime, path, true, dataPosition, dataOrder,
                                 /*refuseDiverged=*/true));
  written_.push_back(path);
  // Only files this run wrote are removed, oldest first, and only once the
  // newer one is whole on disk.
  while (static_cast<int64_t>(written_.size()) > keepLast_) {
    if (runtime.writesFiles())
      std::remove(written_.front().c_str());
    written_.pop_front();
  }
  return path;
}

} // namespace sharc::training
