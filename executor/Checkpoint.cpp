//===- Checkpoint.cpp - parameters and optimizer state as safetensors -----===//

#include "executor/Checkpoint.h"

#include <cstdlib>

namespace sharc::exec {

Status saveCheckpoint(const Runtime &runtime, const std::string &path,
                      bool withOptimizerState) {
  auto params = runtime.gatherParams();
  if (!params)
    return params.status();
  plan::TensorFile file = std::move(*params);
  file.metadata["format"] = "sharc-checkpoint";
  file.metadata["model"] = runtime.plan().modelName;
  file.metadata["step"] = std::to_string(runtime.nextStep() - 1);
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

Status loadCheckpoint(Runtime &runtime, const std::string &path) {
  auto file = plan::readSafeTensors(path);
  if (!file)
    return file.status();
  SHARC_TRY(runtime.loadParams(*file).withContext(path));
  if (file->metadata.count("optimizer_state") == 0)
    return Status::ok();
  SHARC_TRY(runtime.loadOptimizerState(*file).withContext(path));
  auto step = file->metadata.find("step");
  if (step != file->metadata.end()) {
    char *end = nullptr;
    long long taken = std::strtoll(step->second.c_str(), &end, 10);
    if (end == step->second.c_str() || *end != '\0' || taken < 0)
      return Status::invalidInput(path + ": metadata step '" + step->second +
                                  "' is not a step count");
    runtime.setNextStep(taken + 1);
  }
  return Status::ok();
}

} // namespace sharc::exec
