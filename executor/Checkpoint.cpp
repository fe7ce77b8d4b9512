//===- Checkpoint.cpp - parameters and optimizer state as safetensors -----===//

#include "executor/Checkpoint.h"

#include "executor/Divergence.h"
#include "executor/ShardLayout.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <system_error>

namespace sharc::exec {
namespace {

/// Far beyond any run (sharc-run takes at most 10^8 steps a run), and far
/// inside int64 when a run's steps are added to it.
constexpr int64_t kMaxCheckpointStep = 1'000'000'000'000;

} // namespace

Result<int64_t>
checkpointStep(const std::map<std::string, std::string> &metadata) {
  auto text = metadata.find("step");
  if (text == metadata.end())
    return int64_t{-1};
  const std::string &digits = text->second;
  int64_t value = -1;
  auto [end, error] =
      std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size() ||
      value < 0 || value > kMaxCheckpointStep)
    return Status::invalidInput("metadata step '" + digits +
                                "' is not a step count in [0, " +
                                std::to_string(kMaxCheckpointStep) + "]");
  return value;
}

namespace {

/// The checkpoint's own promises, checked before a byte of it is loaded: a
/// file of another kind or another model must not half-load, and a step
/// count must not wrap the runtime's counter.
Status checkMetadata(const Runtime &runtime,
                     const plan::SafeTensorsReader &file, int64_t &step) {
  const auto &metadata = file.metadata();
  if (auto format = metadata.find("format");
      format != metadata.end() && format->second != "sharc-checkpoint")
    return Status::invalidInput("metadata format '" + format->second +
                                "' is not 'sharc-checkpoint'");
  auto state = metadata.find("optimizer_state");
  if (state != metadata.end() && state->second != "adamw")
    return Status::invalidInput("metadata optimizer_state '" + state->second +
                                "' is not 'adamw'");
  auto parsed = checkpointStep(metadata);
  if (!parsed)
    return parsed.status();
  step = *parsed;
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
  for (const plan::TensorSpec &tensor : file.tensors())
    if (!known.count(tensor.name))
      return Status::invalidInput(
          "tensor '" + tensor.name + "' is no parameter of model '" +
          runtime.plan().modelName + "' nor its optimizer state (" +
          std::to_string(file.tensors().size()) +
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
Status readDataPosition(const std::map<std::string, std::string> &metadata,
                        int64_t &position) {
  position = -1;
  auto found = metadata.find("data_position");
  if (found == metadata.end())
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

/// data_shuffle "<stride>/<windows>", both positive (DataLoader::setOrder
/// checks them against the data); absent: file order.
Status readDataOrder(const std::map<std::string, std::string> &metadata,
                     DataOrder &order) {
  order = {};
  auto found = metadata.find("data_shuffle");
  if (found == metadata.end())
    return Status::ok();
  const std::string &text = found->second;
  const char *end = text.data() + text.size();
  auto [slash, strideError] = std::from_chars(text.data(), end, order.stride);
  bool valid = strideError == std::errc() && slash != end && *slash == '/';
  if (valid) {
    auto [last, windowsError] =
        std::from_chars(slash + 1, end, order.numWindows);
    valid = windowsError == std::errc() && last == end;
  }
  if (!valid || order.stride < 1 || order.numWindows < 1) {
    order = {};
    return Status::invalidInput("metadata data_shuffle '" + text +
                                "' is not <stride>/<windows>, both positive");
  }
  return Status::ok();
}

/// Vocabulary parallelism pads embed_tokens and lm_head to a multiple of
/// tp; rows from vocab_size on are never read (no token has their id, the
/// loss masks their logits). The file holds the model's rows only, so a
/// checkpoint moves between padded and unpadded layouts. The rows of the
/// parameter a tensor belongs to (itself or "<param>.exp_avg..."), or -1.
int64_t paddedRows(const plan::Plan &plan, const std::string &tensorName) {
  for (const char *name : {"embed_tokens.weight", "lm_head.weight"}) {
    const plan::ParamEntry *param = plan.findParam(name);
    if (!param || param->globalShape.size() != 2 ||
        param->globalShape[0] <= plan.vocabSize)
      continue;
    std::string prefix = std::string(name) + ".";
    if (tensorName == name || tensorName.compare(0, prefix.size(), prefix) == 0)
      return param->globalShape[0];
  }
  return -1;
}

/// Keeps or zero-pads the leading rows of a row-major tensor to `rows`.
void resizeRows(plan::NamedTensor &tensor, int64_t rows) {
  int64_t rowBytes = static_cast<int64_t>(tensor.bytes.size()) /
                     std::max<int64_t>(tensor.shape[0], 1);
  tensor.bytes.resize(static_cast<size_t>(rows * rowBytes), uint8_t{0});
  tensor.shape[0] = rows;
}

/// The file's tensors one at a time, the last one kept (a tied parameter
/// asks for its owner's again), the vocabulary rows padded as the plan's.
class CheckpointSource {
public:
  CheckpointSource(const Runtime &runtime, const plan::SafeTensorsReader &file)
      : runtime_(runtime), file_(file) {}

  Result<const plan::NamedTensor *> operator()(const std::string &name) {
    if (!current_.name.empty() && current_.name == name)
      return &current_;
    current_.name.clear();
    if (!file_.find(name))
      return nullptr;
    // Into the bytes of the tensor before: no fresh pages to fault in.
    SHARC_TRY(file_.readInto(name, current_));
    int64_t rows = paddedRows(runtime_.plan(), name);
    if (rows > 0 && current_.shape.size() == 2 &&
        current_.shape[0] == runtime_.plan().vocabSize)
      resizeRows(current_, rows);
    return &current_;
  }

private:
  const Runtime &runtime_;
  const plan::SafeTensorsReader &file_;
  plan::NamedTensor current_;
};

/// What a checkpoint of a runtime holds: its metadata, and its tensors in
/// the writer's order (by name; every process gathers in it, since the
/// shards travel between processes, and the first one writes) with their
/// specs in the file (the vocabulary's padded rows left out).
struct CheckpointContents {
  std::map<std::string, std::string> metadata;
  std::vector<Runtime::SavedTensor> saved;
  std::vector<plan::TensorSpec> specs;
};

CheckpointContents checkpointContents(const Runtime &runtime,
                                      bool withOptimizerState,
                                      int64_t dataPosition,
                                      DataOrder dataOrder) {
  CheckpointContents contents;
  std::map<std::string, std::string> &metadata = contents.metadata;
  metadata["format"] = "sharc-checkpoint";
  metadata["model"] = runtime.plan().modelName;
  metadata["step"] = std::to_string(runtime.nextStep() - 1);
  if (dataPosition >= 0)
    metadata["data_position"] = std::to_string(dataPosition);
  if (dataOrder.stride > 0)
    metadata["data_shuffle"] = std::to_string(dataOrder.stride) + "/" +
                               std::to_string(dataOrder.numWindows);
  metadata["lr_schedule"] = scheduleText(runtime.plan().lrSchedule);
  std::vector<Runtime::SavedTensor> &saved = contents.saved;
  saved = runtime.paramTensors();
  if (withOptimizerState) {
    for (Runtime::SavedTensor &tensor : runtime.optimizerStateTensors())
      saved.push_back(std::move(tensor));
    metadata["optimizer_state"] = "adamw";
  }
  std::sort(saved.begin(), saved.end(),
            [](const Runtime::SavedTensor &a, const Runtime::SavedTensor &b) {
              return a.spec.name < b.spec.name;
            });
  const plan::Plan &plan = runtime.plan();
  for (const Runtime::SavedTensor &tensor : saved) {
    contents.specs.push_back(tensor.spec);
    if (paddedRows(plan, tensor.spec.name) > 0)
      contents.specs.back().shape[0] = plan.vocabSize;
  }
  return contents;
}

/// One tensor of a checkpoint as the file holds it (the vocabulary's
/// padded rows left out), gathered into `reuse`'s storage and shown to
/// `watch` on its way when one is given.
Result<plan::NamedTensor> gatherForFile(const Runtime &runtime,
                                        const Runtime::SavedTensor &entry,
                                        DivergenceWatch *watch,
                                        ByteVector reuse) {
  auto tensor = runtime.gatherSaved(entry, std::move(reuse));
  if (!tensor)
    return tensor.status();
  if (watch)
    watch->see(*tensor, entry.isState);
  if (paddedRows(runtime.plan(), tensor->name) > 0)
    resizeRows(*tensor, runtime.plan().vocabSize);
  return tensor;
}

/// The error of a state the watch found diverged; ok otherwise.
Status refusal(const DivergenceWatch &watch) {
  if (std::optional<std::string> verdict = watch.verdict())
    return Status::runtimeError(*verdict +
                                ": the run diverged; nothing was saved");
  return Status::ok();
}

} // namespace

Status saveCheckpoint(const Runtime &runtime, const std::string &path,
                      bool withOptimizerState, int64_t dataPosition,
                      DataOrder dataOrder, bool refuseDiverged) {
  CheckpointContents contents =
      checkpointContents(runtime, withOptimizerState, dataPosition, dataOrder);
  const std::vector<Runtime::SavedTensor> &saved = contents.saved;
  std::unique_ptr<plan::SafeTensorsWriter> writer;
  if (runtime.writesFiles()) {
    auto created = plan::SafeTensorsWriter::create(path, contents.metadata,
                                                   contents.specs);
    if (!created)
      return created.status();
    writer = std::move(*created);
  }
  // Host memory holds two tensors: one gathered (and checked) while the
  // one before it goes to disk on a thread of its own, so the
  // device-to-host copies and the check hide behind the disk. An early
  // return waits for the write in flight (the future's destructor) before
  // `writing` goes.
  DivergenceWatch watch;
  plan::NamedTensor writing;
  std::future<Status> written;
  // Two storages take turns (the one written last is gathered into next),
  // so after the first tensors the gathers write to touched pages.
  ByteVector spare;
  for (const Runtime::SavedTensor &entry : saved) {
    auto tensor = gatherForFile(
        runtime, entry, refuseDiverged ? &watch : nullptr, std::move(spare));
    if (!tensor)
      return tensor.status();
    if (!writer) {
      spare = std::move(tensor->bytes);
      continue;
    }
    if (written.valid())
      SHARC_TRY(written.get());
    spare = std::move(writing.bytes);
    writing = std::move(*tensor);
    try {
      written = std::async(std::launch::async, [&writer, &writing] {
        return writer->write(writing);
      });
    } catch (const std::system_error &) {
      // No thread to spare: this tensor goes to disk before the next one
      // is gathered.
      SHARC_TRY(writer->write(writing));
    }
  }
  if (written.valid())
    SHARC_TRY(written.get());
  // Every process saw the same tensors, so all refuse alike; the writer's
  // temporary goes with it.
  SHARC_TRY(refusal(watch));
  return writer ? writer->commit() : Status::ok();
}

Result<CheckpointSnapshot>
CheckpointSnapshot::take(const Runtime &runtime, int64_t dataPosition,
                         DataOrder dataOrder, bool refuseDiverged,
                         CheckpointSnapshot *previous) {
  CheckpointContents contents =
      checkpointContents(runtime, true, dataPosition, dataOrder);
  CheckpointSnapshot snapshot;
  std::vector<plan::NamedTensor> storages;
  if (previous)
    storages = std::move(previous->tensors_);
  snapshot.metadata_ = std::move(contents.metadata);
  snapshot.specs_ = std::move(contents.specs);
  snapshot.writes_ = runtime.writesFiles();
  DivergenceWatch watch;
  for (const Runtime::SavedTensor &entry : contents.saved) {
    // Every process takes part in the gather; the one that writes keeps.
    // The tensors come in the same order at every save, so tensor i is
    // gathered into the storage of the last snapshot's tensor i.
    ByteVector storage;
    if (size_t i = snapshot.tensors_.size(); i < storages.size())
      storage = std::move(storages[i].bytes);
    auto tensor = gatherForFile(
        runtime, entry, refuseDiverged ? &watch : nullptr, std::move(storage));
    if (!tensor)
      return tensor.status();
    if (!snapshot.writes_)
      continue;
    snapshot.bytes_ += static_cast<int64_t>(tensor->bytes.size());
    snapshot.tensors_.push_back(std::move(*tensor));
  }
  SHARC_TRY(refusal(watch));
  return snapshot;
}

Status CheckpointSnapshot::write(const std::string &path) const {
  if (!writes_)
    return Status::ok();
  auto writer = plan::SafeTensorsWriter::create(path, metadata_, specs_);
  if (!writer)
    return writer.status();
  for (const plan::NamedTensor &tensor : tensors_)
    SHARC_TRY((*writer)->write(tensor));
  return (*writer)->commit();
}

int64_t checkpointBytes(const Runtime &runtime, bool withOptimizerState) {
  int64_t bytes = 0;
  for (const plan::TensorSpec &spec :
       checkpointContents(runtime, withOptimizerState, -1, {}).specs)
    bytes += numElements(spec.shape) * dtypeSize(spec.dtype);
  return bytes;
}

Status loadCheckpoint(Runtime &runtime, const std::string &path,
                      int64_t *dataPosition, DataOrder *dataOrder) {
  auto file = plan::SafeTensorsReader::open(path);
  if (!file)
    return file.status();
  const plan::SafeTensorsReader &reader = **file;
  if (dataPosition)
    SHARC_TRY(
        readDataPosition(reader.metadata(), *dataPosition).withContext(path));
  if (dataOrder)
    SHARC_TRY(readDataOrder(reader.metadata(), *dataOrder).withContext(path));
  int64_t step = -1;
  SHARC_TRY(checkMetadata(runtime, reader, step).withContext(path));
  CheckpointSource source(runtime, reader);
  SHARC_TRY(runtime.loadParams(std::ref(source)).withContext(path));
  if (reader.metadata().count("optimizer_state") == 0)
    return Status::ok();
  SHARC_TRY(runtime.loadOptimizerState(std::ref(source)).withContext(path));
  if (step >= 0)
    runtime.setNextStep(step + 1);
  return Status::ok();
}

bool snapshotFits(int64_t bytes, int64_t availableBytes, std::string &why) {
  if (availableBytes < 0) {
    why = "this host does not say how much memory it has available";
    return false;
  }
  double available = static_cast<double>(availableBytes);
  if (2.0 * static_cast<double>(bytes) <= available)
    return true;
  char text[160];
  std::snprintf(text, sizeof(text),
                "a checkpoint of %.2f GB is more than half of the %.2f GB "
                "this host has available",
                static_cast<double>(bytes) / 1e9, available / 1e9);
  why = text;
  return false;
}

} // namespace sharc::exec
