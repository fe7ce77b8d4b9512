//===- Training.cpp - sharc-run's evaluation and checkpoint rotation ------===//

#include "tools/sharc-run/Training.h"

#include "executor/Checkpoint.h"
#include "planner/plan/FileText.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>
#include <utility>

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

std::string formatSnapshotLine(const std::string &path, int64_t bytes,
                               double seconds) {
  char numbers[96];
  double size = static_cast<double>(bytes);
  if (size < 1e9)
    std::snprintf(numbers, sizeof(numbers),
                  " in the background (%.1f MB gathered in %.1f s)", size / 1e6,
                  seconds);
  else
    std::snprintf(numbers, sizeof(numbers),
                  " in the background (%.2f GB gathered in %.1f s)", size / 1e9,
                  seconds);
  return "saving " + path + numbers;
}

std::string formatWait(double seconds) {
  char text[64];
  std::snprintf(text, sizeof(text), ", the run waited %.1f s for it", seconds);
  return text;
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

CheckpointRotation::~CheckpointRotation() {
  // An early return of the run: the file in flight is finished (or left
  // as its temporary, removed on failure), never cut off mid-write.
  if (writing_.valid())
    writing_.wait();
}

void CheckpointRotation::rotate(const std::string &path, int64_t step,
                                bool writesFiles) {
  written_.push_back(path);
  lastStep_ = step;
  // Only files this run wrote are removed, oldest first, and only once the
  // newer one is whole on disk.
  while (static_cast<int64_t>(written_.size()) > keepLast_) {
    if (writesFiles)
      std::remove(written_.front().c_str());
    written_.pop_front();
  }
}

Result<std::string> CheckpointRotation::save(const exec::Runtime &runtime,
                                             int64_t dataPosition,
                                             exec::DataOrder dataOrder) {
  std::string path = rotatingCheckpointPath(savePath_, runtime.nextStep() - 1);
  if (!background_) {
    SHARC_TRY(exec::saveCheckpoint(runtime, path, true, dataPosition, dataOrder,
                                   /*refuseDiverged=*/true));
    rotate(path, runtime.nextStep() - 1, runtime.writesFiles());
    return path;
  }
  if (writing_.valid())
    return Status::runtimeError("a background save is still in flight");
  // The last snapshot's storage is gathered into again (kept, not freed,
  // once its file was whole).
  auto snapshot =
      exec::CheckpointSnapshot::take(runtime, dataPosition, dataOrder,
                                     /*refuseDiverged=*/true, snapshot_.get());
  if (!snapshot)
    return snapshot.status();
  snapshot_ = std::make_unique<exec::CheckpointSnapshot>(std::move(*snapshot));
  writingPath_ = path;
  writesFiles_ = runtime.writesFiles();
  writingStep_ = runtime.nextStep() - 1;
  writeStart_ = std::chrono::steady_clock::now();
  auto write = [this] {
    Status status = snapshot_->write(writingPath_);
    writeSeconds_ = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - writeStart_)
                        .count();
    return status;
  };
  try {
    writing_ = std::async(std::launch::async, write);
  } catch (const std::system_error &) {
    // No thread to spare: written now, reported by finished() as ever.
    std::promise<Status> done;
    done.set_value(write());
    writing_ = done.get_future();
  }
  return path;
}

Result<std::optional<CheckpointRotation::Written>>
CheckpointRotation::finished(bool wait) {
  if (!writing_.valid())
    return std::optional<Written>{};
  if (!wait &&
      writing_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return std::optional<Written>{};
  Status status = writing_.get();
  if (!status)
    return status.withContext("step " + std::to_string(writingStep_));
  rotate(writingPath_, writingStep_, writesFiles_);
  return std::optional<Written>{Written{writingPath_, writeSeconds_}};
}

Status linkOrCopy(const std::string &from, const std::string &to) {
  std::string temporary = to + ".link-" + std::to_string(::getpid());
  std::remove(temporary.c_str());
  if (::link(from.c_str(), temporary.c_str()) == 0) {
    if (::rename(temporary.c_str(), to.c_str()) == 0)
      return Status::ok();
    std::remove(temporary.c_str());
  }
  // Another file system, or one without hard links.
  auto reader = FileReader::open(from, "checkpoint");
  if (!reader)
    return reader.status();
  auto writer = AtomicFileWriter::open(to, "checkpoint");
  if (!writer)
    return writer.status();
  constexpr int64_t kPiece = int64_t{64} << 20;
  std::string piece;
  for (int64_t at = 0; at < (*reader)->size(); at += kPiece) {
    piece.resize(static_cast<size_t>(std::min(kPiece, (*reader)->size() - at)));
    SHARC_TRY((*reader)->readAt(at, piece.data(),
                                static_cast<int64_t>(piece.size())));
    SHARC_TRY((*writer)->append(piece));
  }
  return (*writer)->commit();
}

} // namespace sharc::training
