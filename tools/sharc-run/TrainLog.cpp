//===- TrainLog.cpp - sharc-run --log: one CSV row per step ---------------===//

#include "tools/sharc-run/TrainLog.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sys/stat.h>
#include <vector>

namespace sharc::training {
namespace {

const char *kHeader = "step,kind,loss,lr,grad_norm,tokens_per_s,step_s,"
                      "elapsed_s,val_loss,val_ppl\n";

/// The rows of an existing log at `path` that a run resumed after step
/// `step` keeps: its train rows up to that step and its val rows before
/// it (the resumed run evaluates at `step` again before training). None
/// where the file is missing or has another header.
std::vector<std::string> rowsBefore(const std::string &path, int64_t step) {
  std::vector<std::string> kept;
  std::ifstream file(path);
  std::string line;
  if (!std::getline(file, line) || line + "\n" != kHeader)
    return kept;
  while (std::getline(file, line)) {
    size_t comma = line.find(',');
    if (comma == std::string::npos || comma == 0 || comma > 18 ||
        !std::all_of(line.begin(), line.begin() + comma,
                     [](unsigned char c) { return std::isdigit(c); }))
      continue;
    int64_t rowStep = std::stoll(line.substr(0, comma));
    bool train = line.compare(comma, 7, ",train,") == 0;
    bool val = line.compare(comma, 5, ",val,") == 0;
    if ((train && rowStep <= step) || (val && rowStep < step))
      kept.push_back(line + "\n");
  }
  return kept;
}

/// A row's elapsed_s (the eighth column), or 0 where it is empty or not
/// a number.
double elapsedOf(const std::string &row) {
  size_t start = 0;
  for (int column = 0; column < 7; ++column) {
    start = row.find(',', start);
    if (start == std::string::npos)
      return 0;
    ++start;
  }
  char *end = nullptr;
  double value = std::strtod(row.c_str() + start, &end);
  return end != row.c_str() + start && std::isfinite(value) && value > 0 ? value
                                                                         : 0;
}

} // namespace

Result<TrainLog> TrainLog::open(const std::string &path,
                                int64_t continueAfterStep) {
  // A FIFO or a device would take the rows, or block, without being a log.
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
    return Status::invalidInput("--log " + path +
                                ": not a regular file; name a file to write");
  std::vector<std::string> kept;
  if (continueAfterStep >= 0)
    kept = rowsBefore(path, continueAfterStep);
  std::FILE *file = std::fopen(path.c_str(), "w");
  if (!file)
    return Status::invalidInput("--log " + path +
                                ": cannot write: " + std::strerror(errno));
  TrainLog log(path, file);
  // The header and the kept rows in one write; the resumed run's time
  // goes on from theirs (the time between the runs is no training).
  std::string start = kHeader;
  for (const std::string &row : kept) {
    start += row;
    log.elapsedOffset_ = std::max(log.elapsedOffset_, elapsedOf(row));
  }
  SHARC_TRY(log.writeRow(start));
  return log;
}

std::string TrainLog::formatNumber(double value, bool unsetBelowZero,
                                   int maxDigits) {
  if (std::isnan(value) || (unsetBelowZero && value < 0))
    return "";
  char text[40];
  for (int digits = 6; digits <= std::max(maxDigits, 6); ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  return text;
}

Status TrainLog::writeStep(const exec::StepRecord &record) {
  std::string row =
      std::to_string(record.step) + ",train," + formatNumber(record.loss) +
      "," + formatNumber(record.lr, true) + "," +
      formatNumber(record.gradNorm) + "," +
      formatNumber(record.tokensPerSecond, false, 6) + "," +
      formatNumber(record.seconds) + "," +
      formatNumber(elapsedOffset_ + record.elapsedSeconds, true) + ",,\n";
  return writeRow(row);
}

Status TrainLog::writeEval(int64_t step, const EvalResult &result,
                           double elapsedSeconds) {
  std::string row = std::to_string(step) + ",val,,,,,," +
                    formatNumber(elapsedOffset_ + elapsedSeconds, true) + "," +
                    formatNumber(result.loss) + "," +
                    formatNumber(std::exp(result.loss), false, 6) + "\n";
  return writeRow(row);
}

Status TrainLog::writeRow(const std::string &row) {
  // Flushed row by row: a plot drawn mid-run sees every finished step.
  if (std::fputs(row.c_str(), file_.get()) == EOF ||
      std::fflush(file_.get()) != 0)
    return Status::runtimeError("--log " + path_ +
                                ": write failed: " + std::strerror(errno));
  return Status::ok();
}

} // namespace sharc::training
