//===- Metrics.cpp - per-step loss, time and throughput -------------------===//

#include "executor/Metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sharc::exec {

const StepRecord &Metrics::record(int64_t step, const StepStats &stats) {
  StepRecord record{.step = step,
                    .loss = stats.loss,
                    .seconds = stats.seconds,
                    .tokensPerSecond = 0.0,
                    .gradNorm = stats.gradNorm};
  if (stats.seconds > 0)
    record.tokensPerSecond =
        static_cast<double>(tokensPerStep_) / stats.seconds;
  records_.push_back(record);
  return records_.back();
}

double Metrics::medianSeconds() const {
  if (records_.empty())
    return 0.0;
  std::vector<double> seconds;
  for (const StepRecord &record : records_)
    seconds.push_back(record.seconds);
  std::sort(seconds.begin(), seconds.end());
  size_t mid = seconds.size() / 2;
  return seconds.size() % 2 ? seconds[mid]
                            : 0.5 * (seconds[mid - 1] + seconds[mid]);
}

double Metrics::medianTokensPerSecond() const {
  double seconds = medianSeconds();
  return seconds > 0 ? static_cast<double>(tokensPerStep_) / seconds : 0.0;
}

std::string Metrics::formatDuration(double seconds) {
  long long whole = static_cast<long long>(seconds + 0.5);
  char text[48];
  std::snprintf(text, sizeof(text), "%lld:%02lld:%02lld", whole / 3600,
                whole / 60 % 60, whole % 60);
  return text;
}

std::string Metrics::formatStep(const StepRecord &record) {
  char lr[32] = "";
  if (record.lr >= 0)
    std::snprintf(lr, sizeof(lr), "  lr %.3e", record.lr);
  char gradNorm[32] = "";
  if (!std::isnan(record.gradNorm))
    std::snprintf(gradNorm, sizeof(gradNorm), "  grad_norm %.4g",
                  record.gradNorm);
  std::string progress;
  if (record.elapsedSeconds >= 0)
    progress += "  elapsed " + formatDuration(record.elapsedSeconds);
  if (record.etaSeconds >= 0)
    progress += "  eta " + formatDuration(record.etaSeconds);
  char line[256];
  std::snprintf(line, sizeof(line),
                "step %4lld  loss %.5f%s%s  time %.1f ms  tokens/s %.0f%s",
                static_cast<long long>(record.step), record.loss, lr, gradNorm,
                record.seconds * 1e3, record.tokensPerSecond, progress.c_str());
  return line;
}

std::string Metrics::summary() const {
  if (records_.empty())
    return "no steps run";
  char line[192];
  std::snprintf(line, sizeof(line),
                "%zu steps  first loss %.5f  last loss %.5f  median step "
                "%.1f ms  tokens/s %.0f",
                records_.size(), records_.front().loss, records_.back().loss,
                medianSeconds() * 1e3, medianTokensPerSecond());
  return line;
}

} // namespace sharc::exec
