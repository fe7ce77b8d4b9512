//===- Checkpoint.cpp - parameters and optimizer state as safetensors -----===//

#include "executor/Checkpoint.h"

#include <charconv>
#include <cstdio>
#include <set>

namespace sharc::exec {
namespace {

/// Far beyond any run (sharc-run takes at most 10^8 steps a run), and far
/// inside int64 when a run's steps are added to it.
constexpr int64_t kMaxCheckpointStep = 1'000'000'000'000;

/// The checkpoint's own promises, checked before a byte of it is loaded: a
/// file of another kind or another model must not half-load, and a step
/// count must not wrap the runtime's counter.
Status checkMetadata(const Runtime &runtime, const plan::TensorFile &file,
                     int64_t &step) {
  const auto &metadata = file.metadata;
  if (auto format = metadata.find("format");
      format != metadata.end() && format->second != "sharc-checkpoint")
    return Status::invalidInput("metadata format '" + format->second +
                                "' is not 'sharc-checkpoint'");
  auto state = metadata.find("optimizer_state");
  if (state != metadata.end() && state->second != "adamw")
    return Status::invalidInput("metadata optimizer_state '" + state->second +
                                "' is not 'adamw'");
  step = -1;
  if (auto text = metadata.find("step"); text != metadata.end()) {
    const std::string &digits = text->second;
    int64_t value = -1;
    auto [end, error] =
        std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (error != std::errc() || end != digits.data() + digits.size() ||
        value < 0 || value > kMaxCheckpointStep)
      return Status::invalidInput("metadata step '" + digits +
                                  "' is not a step count in [0, " +
                                  std::to_string(kMaxCheckpointStep) + "]");
    step = value;
  }
  // Every tensor must be something this plan loads: a tensor it does not
  // know is a checkpoint of a larger or different model, which would
  // otherwise load its matching part and drop the rest without a word.
  std::set<std::string> known;
  for (const plan::ParamEntry &param : runtime.plan().params) {
    if (!param.tiedTo.empty())
      continue;
    known.insert(param.name);
    for (size_t i = 0; i < 2 || i < param.state.size(); ++i)
      known.insert(Runtime::stateTensorName(param.name, i));
  }
  for (const plan::NamedTensor &tensor : file.tensors)
    if (!known.count(tensor.name))
      return Status::invalidInput(
          "tensor '" + tensor.name + "' is no parameter of model '" +
          runtime.plan().modelName + "' nor its optimizer state (" +
          std::to_string(file.tensors.size()) +
          " tensors in the file; a checkpoint of another model?)");
  return Status::ok();
}

} // namespace

namespace {

/// "cosine, warmup 100, total 2000, min 0.1" or "constant": for a reader of
/// the file; resuming takes the schedule from the plan, a function of step.
std::string scheduleText(const plan::LrSchedule &schedule) {
  if (schedule.isConstant())
    return "constant";
  char text[128];
  std::snprintf(
      text, sizeof(text), "%s, warmup %lld, total %lld, min %.17g",
      schedule.decay.c_str(), static_cast<long long>(schedule.warmupSteps),
      static_cast<long long>(schedule.totalSteps), schedule.minFactor);
  return text;
}

/// data_position as a window count in [0, 2^62]: far inside int64 when a
/// run's windows are added to it, and never a wrapped number.
Status readDataPosition(const plan::TensorFile &file, int64_t &position) {
  position = -1;
  auto found = file.metadata.find("data_position");
  if (found == file.metadata.end())
    return Status::ok();
  const std::string &digits = found->second;
  int64_t value = -1;
  auto [end, error] =
      std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size() ||
      value < 0 || value > (int64_t{1} << 62))
    return Status::invalidInput("metadata data_position '" + digits +
                                "' is not a window count in [0, 2^62]");
  position = value;
  return Status::ok();
}

} // namespace

Status saveCheckpoint(const Runtime &runtime, const std::string &path,
                      bool withOptimizerState, int64_t dataPosition) {
  auto params = runtime.gatherParams();
  if (!params)
    return params.status();
  plan::TensorFile file = std::move(*params);
  file.metadata["format"] = "sharc-checkpoint";
  file.metadata["model"] = runtime.plan().modelName;
  file.metadata["step"] = std::to_string(runtime.nextStep() - 1);
  if (dataPosition >= 0)
    file.metadata["data_position"] = std::to_string(dataPosition);
  file.metadata["lr_schedule"] = scheduleText(runtime.plan().lrSchedule);
  if (withOptimizerState) {
    auto state = runtime.gatherOptimizerState();
    if (!state)
      return state.status();
    for (plan::NamedTensor &tensor : state->tensors)
      file.tensors.push_back(std::move(tensor));
    file.metadata["optimizer_state"] = "adamw";
  }
  return plan::writeSafeTensors(path, file);
}

Status loadCheckpoint(Runtime &runtime, const std::string &path,
                      int64_t *dataPosition) {
  auto file = plan::readSafeTensors(path);
  if (!file)
    return file.status();
  if (dataPosition)
    SHARC_TRY(readDataPosition(*file, *dataPosition).withContext(path));
  int64_t step = -1;
  SHARC_TRY(checkMetadata(runtime, *file, step).withContext(path));
  SHARC_TRY(runtime.loadParams(*file).withContext(path));
  if (file->metadata.count("optimizer_state") == 0)
    return Status::ok();
  SHARC_TRY(runtime.loadOptimizerState(*file).withContext(path));
  if (step >= 0)
    runtime.setNextStep(step + 1);
  return Status::ok();
}

} // namespace sharc::exec
