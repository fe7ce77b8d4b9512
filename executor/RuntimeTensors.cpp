//===- RuntimeTensors.cpp - tensors in and out of every rank's memory -----===//
//
// The Runtime's host side: parameters drawn or loaded, optimizer state,
// batches and outputs, each a global tensor on the host that every rank
// slices (ShardLayout.h) through a host staging buffer and the backend's
// upload/download, so this file never touches rank memory directly. A
// normal draw runs where the rank's memory is (RankDevice::drawNormal,
// the same bits on every backend), without a host copy.
//
//===----------------------------------------------------------------------===//

#include "executor/Runtime.h"

#include "executor/ParamInit.h"
#include "executor/ShardLayout.h"
#include "planner/plan/HostThreads.h"

#include <algorithm>
#include <cstddef>
#include <tuple>
#include <vector>

namespace sharc::exec {

using plan::Buffer;
using plan::NamedTensor;
using plan::ParamEntry;
using plan::TensorFile;

namespace {

std::string shapeText(const std::vector<int64_t> &shape) {
  return opcheck::shapeText(shape);
}

bool isFloatType(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F64;
}

/// The index in param.state of its fp32 master (bf16-mixed: the state
/// buffer named "master:<param>"), or -1.
int64_t masterIndex(const plan::Plan &plan, const ParamEntry &param) {
  for (size_t i = 0; i < param.state.size(); ++i)
    if (plan.buffers[param.state[i]].name.rfind("master:", 0) == 0)
      return static_cast<int64_t>(i);
  return -1;
}

/// Draws the shard `slice` of a parameter initialised by `init` into rank
/// memory: a normal draw where the tensor lives (on a GPU, without the
/// host), ones and zeros through a host buffer.
Status drawShard(RankDevice &device, const plan::InitSpec &init, uint64_t seed,
                 std::string_view name, const ShardSlice &slice,
                 kernels::TensorView out) {
  if (init.kind == "normal" &&
      (out.dtype == DType::F32 || out.dtype == DType::BF16)) {
    return device.drawNormal(shardDraw(init, seed, name, slice, out).args);
  }
  int64_t numBytes = numElements(slice.localShape) * dtypeSize(out.dtype);
  std::vector<std::byte> values(static_cast<size_t>(numBytes));
  SHARC_TRY(initShard(init, seed, name, slice, values.data(), out.dtype));
  return device.upload(out.data, values.data(), numBytes);
}

} // namespace

Status Runtime::zeroBuffer(int64_t rank, int64_t bufferId) {
  return local(rank).device->zero(storage(rank, bufferId),
                                  plan_.buffers[bufferId].numBytes);
}

Result<bool> Runtime::weightsFromMaster(const RankState &rank,
                                        const ParamEntry &param) const {
  int64_t master = masterIndex(plan_, param);
  if (master < 0)
    return false;
  const Buffer &masterBuffer = plan_.buffers[param.state[master]];
  if (masterBuffer.dtype != DType::F32)
    return false;
  auto slice = shardSlice(plan_.mesh, param.sharding, param.globalShape,
                          rank.env.coords);
  auto masterSlice = shardSlice(plan_.mesh, param.stateLayout(),
                                param.globalShape, rank.env.coords);
  if (!slice || !masterSlice)
    return slice ? masterSlice.status() : slice.status();
  if (!sameElements(*slice, *masterSlice))
    return false;
  SHARC_TRY(rank.device->convert(
      {storage(rank.rank, masterBuffer.id), DType::F32},
      {storage(rank.rank, param.buffer), plan_.buffers[param.buffer].dtype},
      numElements(slice->localShape)));
  return true;
}

Status Runtime::initParams(uint64_t seed) {
  for (const ParamEntry &param : plan_.params) {
    // A tied parameter draws its values under the name it is tied to, so
    // that it equals that parameter even where it has its own storage.
    const std::string &source =
        param.tiedTo.empty() ? param.name : param.tiedTo;
    const Buffer &buffer = plan_.buffers[param.buffer];
    for (const auto &rank : ranks_) {
      if (!holdsStage(*rank, param.sharding))
        continue;
      for (int64_t state : param.state)
        SHARC_TRY(zeroBuffer(rank->rank, state));
      RankDevice &device = *rank->device;
      // The master holds the drawn values before rounding: param is the
      // master rounded to bf16, and the f32 run starts from the master's.
      if (int64_t master = masterIndex(plan_, param); master >= 0) {
        const Buffer &masterBuffer = plan_.buffers[param.state[master]];
        // Under ZeRO-1 the master is the rank's block of the parameter.
        auto masterSlice = shardSlice(plan_.mesh, param.stateLayout(),
                                      param.globalShape, rank->env.coords);
        if (!masterSlice)
          return masterSlice.status();
        SHARC_TRY(drawShard(
            device, param.init, seed, source, *masterSlice,
            {storage(rank->rank, masterBuffer.id), masterBuffer.dtype}));
        // A draw stores its double rounded to float, then to the storage
        // type (kernels::storeElement): rounding the f32 master gives the
        // parameter's drawn bits, so one draw of billions serves both.
        auto rounded = weightsFromMaster(*rank, param);
        if (!rounded)
          return rounded.status();
        if (*rounded)
          continue;
      }
      auto slice = shardSlice(plan_.mesh, param.sharding, param.globalShape,
                              rank->env.coords);
      if (!slice)
        return slice.status();
      SHARC_TRY(drawShard(device, param.init, seed, source, *slice,
                          {storage(rank->rank, param.buffer), buffer.dtype}));
    }
  }
  nextStep_ = 1;
  return Status::ok();
}

Status Runtime::scatterTensor(const NamedTensor &tensor, int64_t bufferId,
                              const plan::Sharding &sharding) {
  const Buffer &buffer = plan_.buffers[bufferId];
  if (isFloatType(tensor.dtype) != isFloatType(buffer.dtype) ||
      (!isFloatType(buffer.dtype) && tensor.dtype != buffer.dtype))
    return Status::invalidInput("tensor '" + tensor.name + "' is " +
                                dtypeName(tensor.dtype) + ", the plan needs " +
                                dtypeName(buffer.dtype));
  int64_t needed = numElements(tensor.shape) * dtypeSize(tensor.dtype);
  if (static_cast<int64_t>(tensor.bytes.size()) != needed)
    return Status::invalidInput("tensor '" + tensor.name + "' has " +
                                std::to_string(tensor.bytes.size()) +
                                " bytes, its shape needs " +
                                std::to_string(needed));
  std::vector<std::byte> shard;
  for (const auto &rank : ranks_) {
    if (!holdsStage(*rank, sharding))
      continue;
    auto slice =
        shardSlice(plan_.mesh, sharding, tensor.shape, rank->env.coords);
    if (!slice)
      return slice.status().withContext("tensor '" + tensor.name + "'");
    if (slice->localShape != buffer.shape)
      return Status::invalidInput(
          "tensor '" + tensor.name + "' of shape " + shapeText(tensor.shape) +
          " does not shard to buffer shape " + shapeText(buffer.shape));
    // A whole tensor in the buffer's type goes up as it is.
    if (slice->localShape == tensor.shape && tensor.dtype == buffer.dtype) {
      SHARC_TRY(rank->device->upload(
          storage(rank->rank, bufferId), tensor.bytes.data(),
          static_cast<int64_t>(tensor.bytes.size())));
      continue;
    }
    shard.resize(static_cast<size_t>(buffer.numBytes));
    copyGlobalToLocal(tensor.bytes.data(), tensor.dtype, *slice, shard.data(),
                      buffer.dtype);
    SHARC_TRY(rank->device->upload(storage(rank->rank, bufferId), shard.data(),
                                   buffer.numBytes));
  }
  return Status::ok();
}

Result<NamedTensor>
Runtime::gatherTensor(const std::string &name, int64_t bufferId,
                      const std::vector<int64_t> &globalShape,
                      const plan::Sharding &sharding, DType dtype, Rows rows,
                      ByteVector reuse) const {
  const Buffer &buffer = plan_.buffers[bufferId];
  // The flattened global elements [begin, end) that the rows hold.
  std::vector<int64_t> shape = globalShape;
  int64_t begin = 0, end = numElements(globalShape);
  if (rows.count >= 0) {
    int64_t rowElements = end / globalShape[0];
    begin = rows.first * rowElements;
    end = begin + rows.count * rowElements;
    shape[0] = rows.count;
  }
  NamedTensor tensor{
      .name = name, .dtype = dtype, .shape = shape, .bytes = std::move(reuse)};
  resizeForOverwrite(tensor.bytes,
                     static_cast<size_t>((end - begin) * dtypeSize(dtype)));
  int64_t elementBytes = dtypeSize(buffer.dtype);
  if (processes_->count() == 1) {
    // One shard at a time, only the local bytes that hold the rows.
    BytesOf<std::byte> part;
    for (const auto &rank : ranks_) {
      if (!isShardOwner(plan_.mesh, sharding, rank->env.coords))
        continue;
      auto slice =
          shardSlice(plan_.mesh, sharding, globalShape, rank->env.coords);
      if (!slice)
        return slice.status().withContext("tensor '" + name + "'");
      LocalSpan span = localSpanOf(*slice, begin, end);
      if (span.begin == span.end)
        continue;
      // The whole of a whole tensor in the buffer's type comes down as it
      // is.
      if (slice->localShape == globalShape && rows.count < 0 &&
          buffer.dtype == dtype) {
        SHARC_TRY(rank->device->download(
            tensor.bytes.data(), storage(rank->rank, bufferId),
            static_cast<int64_t>(tensor.bytes.size())));
        continue;
      }
      resizeForOverwrite(
          part, static_cast<size_t>((span.end - span.begin) * elementBytes));
      const auto *base =
          static_cast<const std::byte *>(storage(rank->rank, bufferId));
      SHARC_TRY(rank->device->download(part.data(),
                                       base + span.begin * elementBytes,
                                       static_cast<int64_t>(part.size())));
      copyLocalRangeToGlobal(part.data(), buffer.dtype, span.begin, *slice,
                             begin, end, tensor.bytes.data(), dtype);
    }
    return tensor;
  }
  // Over processes: every rank's buffer, this process's downloaded and
  // the others' received, [rank][bytes].
  size_t shardBytes = static_cast<size_t>(buffer.numBytes);
  BytesOf<std::byte> shards;
  resizeForOverwrite(shards, shardBytes * static_cast<size_t>(span_.world));
  std::byte *mine = shards.data() + shardBytes * span_.first;
  for (const auto &rank : ranks_)
    if (isShardOwner(plan_.mesh, sharding, rank->env.coords))
      SHARC_TRY(rank->device->download(
          mine + shardBytes * (rank->rank - span_.first),
          storage(rank->rank, bufferId), buffer.numBytes));
  SHARC_TRY(processes_->allGather(mine, shards.data(),
                                  buffer.numBytes * span_.count));
  for (int64_t r = 0; r < span_.world; ++r) {
    std::vector<int64_t> coords = meshCoords(plan_.mesh, r);
    if (!isShardOwner(plan_.mesh, sharding, coords))
      continue;
    auto slice = shardSlice(plan_.mesh, sharding, globalShape, coords);
    if (!slice)
      return slice.status().withContext("tensor '" + name + "'");
    copyLocalRangeToGlobal(shards.data() + shardBytes * r, buffer.dtype, 0,
                           *slice, begin, end, tensor.bytes.data(), dtype);
  }
  return tensor;
}

Status Runtime::loadParams(const TensorSource &source) {
  for (const ParamEntry &param : plan_.params) {
    const std::string &name = param.tiedTo.empty() ? param.name : param.tiedTo;
    auto tensor = source(name);
    if (!tensor)
      return tensor.status();
    if (!*tensor)
      return Status::invalidInput("no tensor '" + name + "' for parameter '" +
                                  param.name + "'");
    const ParamEntry *owner = plan_.findParam(name);
    if ((*tensor)->shape != owner->globalShape)
      return Status::invalidInput(
          "tensor '" + name + "' has shape " + shapeText((*tensor)->shape) +
          ", the plan expects " + shapeText(owner->globalShape));
    for (const auto &rank : ranks_)
      if (holdsStage(*rank, param.sharding))
        for (int64_t state : param.state)
          SHARC_TRY(zeroBuffer(rank->rank, state));
    // The master takes the tensor as stored (a bf16-mixed checkpoint holds
    // the f32 masters), so a resumed run continues exactly; the weights are
    // its rounding, made on the device where a rank can (no host
    // conversion, no second upload), else rounded on the host.
    bool rounded = false;
    if (int64_t master = masterIndex(plan_, param); master >= 0) {
      SHARC_TRY(
          scatterTensor(**tensor, param.state[master], param.stateLayout()));
      rounded = true;
      for (const auto &rank : ranks_) {
        if (!holdsStage(*rank, param.sharding))
          continue;
        auto done = weightsFromMaster(*rank, param);
        if (!done)
          return done.status();
        rounded = rounded && *done;
      }
    }
    if (!rounded)
      SHARC_TRY(scatterTensor(**tensor, param.buffer, param.sharding));
  }
  nextStep_ = 1;
  return Status::ok();
}

namespace {

Runtime::TensorSource sourceOf(const TensorFile &file) {
  return [&file](const std::string &name) -> Result<const NamedTensor *> {
    return file.find(name);
  };
}

} // namespace

Status Runtime::loadParams(const TensorFile &file) {
  return loadParams(sourceOf(file));
}

std::vector<Runtime::SavedTensor> Runtime::paramTensors() const {
  std::vector<SavedTensor> tensors;
  for (const ParamEntry &param : plan_.params) {
    if (!param.tiedTo.empty())
      continue;
    int64_t master = masterIndex(plan_, param);
    int64_t source = master >= 0 ? param.state[master] : param.buffer;
    tensors.push_back(
        {.spec = {param.name, plan_.buffers[source].dtype, param.globalShape},
         .buffer = source,
         .sharding = master >= 0 ? param.stateLayout() : param.sharding,
         .isState = false});
  }
  return tensors;
}

std::vector<Runtime::SavedTensor> Runtime::optimizerStateTensors() const {
  std::vector<SavedTensor> tensors;
  for (const ParamEntry &param : plan_.params) {
    if (!param.tiedTo.empty())
      continue;
    int64_t master = masterIndex(plan_, param);
    for (size_t i = 0; i < param.state.size(); ++i) {
      // The master is saved as the parameter (paramTensors).
      if (static_cast<int64_t>(i) == master)
        continue;
      int64_t buffer = param.state[i];
      tensors.push_back(
          {.spec = {stateTensorName(param.name, i), plan_.buffers[buffer].dtype,
                    param.globalShape},
           .buffer = buffer,
           .sharding = param.stateLayout(),
           .isState = true});
    }
  }
  return tensors;
}

Result<NamedTensor> Runtime::gatherSaved(const SavedTensor &tensor,
                                         ByteVector reuse) const {
  return gatherTensor(tensor.spec.name, tensor.buffer, tensor.spec.shape,
                      tensor.sharding, tensor.spec.dtype, {0, -1},
                      std::move(reuse));
}

namespace {

Result<TensorFile> gatherAll(const Runtime &runtime,
                             const std::vector<Runtime::SavedTensor> &saved) {
  TensorFile file;
  for (const Runtime::SavedTensor &entry : saved) {
    auto tensor = runtime.gatherSaved(entry);
    if (!tensor)
      return tensor.status();
    file.tensors.push_back(std::move(*tensor));
  }
  return file;
}

} // namespace

Result<TensorFile> Runtime::gatherParams() const {
  return gatherAll(*this, paramTensors());
}

Result<TensorFile> Runtime::gatherOptimizerState() const {
  return gatherAll(*this, optimizerStateTensors());
}

std::string Runtime::stateTensorName(const std::string &param, size_t index) {
  // torch.optim.AdamW's names for the two moments.
  if (index == 0)
    return param + ".exp_avg";
  if (index == 1)
    return param + ".exp_avg_sq";
  return param + ".state" + std::to_string(index);
}

Status Runtime::loadOptimizerState(const TensorSource &source) {
  for (const ParamEntry &param : plan_.params) {
    const std::string &owned = param.tiedTo.empty() ? param.name : param.tiedTo;
    const ParamEntry *owner = plan_.findParam(owned);
    int64_t master = masterIndex(plan_, param);
    for (size_t i = 0; i < param.state.size(); ++i) {
      // Loaded with the parameter (loadParams).
      if (static_cast<int64_t>(i) == master)
        continue;
      std::string name = stateTensorName(owned, i);
      auto tensor = source(name);
      if (!tensor)
        return tensor.status();
      if (!*tensor)
        return Status::invalidInput("no optimizer state tensor '" + name + "'");
      if ((*tensor)->shape != owner->globalShape)
        return Status::invalidInput(
            "tensor '" + name + "' has shape " + shapeText((*tensor)->shape) +
            ", the plan expects " + shapeText(owner->globalShape));
      SHARC_TRY(scatterTensor(**tensor, param.state[i], param.stateLayout()));
    }
  }
  return Status::ok();
}

Status Runtime::loadOptimizerState(const TensorFile &file) {
  return loadOptimizerState(sourceOf(file));
}

Status Runtime::setBatch(const std::vector<int32_t> &tokens) {
  int64_t seqLen = plan_.seqLen;
  std::vector<int32_t> labels(tokens.size(), -100);
  // A batch of the wrong size gets its labels only where they exist; the
  // size is reported by the overload below.
  for (size_t i = 0; i + 1 < tokens.size(); ++i)
    if (seqLen > 0 && static_cast<int64_t>(i % seqLen) + 1 < seqLen)
      labels[i] = tokens[i + 1];
  return setBatch(tokens, labels);
}

Status Runtime::setBatch(const std::vector<int32_t> &tokens,
                         const std::vector<int32_t> &labels) {
  const plan::IoEntry *tokensIn = plan_.findInput("tokens");
  if (!tokensIn)
    return Status::invalidInput("the plan has no 'tokens' input");
  int64_t batch = plan_.batchSize, seqLen = plan_.seqLen;
  for (const auto &[what, ids] :
       {std::pair{"tokens", &tokens}, std::pair{"labels", &labels}})
    if (static_cast<int64_t>(ids->size()) != batch * seqLen)
      return Status::invalidInput(std::string("a batch needs ") +
                                  std::to_string(batch) + " x " +
                                  std::to_string(seqLen) + " " + what +
                                  ", got " + std::to_string(ids->size()));
  auto outside = [&](int32_t id, int64_t b, int64_t s, const char *what) {
    return Status::invalidInput(std::string(what) + " " + std::to_string(id) +
                                " at [" + std::to_string(b) + ", " +
                                std::to_string(s) +
                                "] outside the vocabulary [0, " +
                                std::to_string(plan_.vocabSize) + ")");
  };
  auto inVocab = [&](int32_t id) {
    return id >= 0 && (plan_.vocabSize <= 0 || id < plan_.vocabSize);
  };
  // Sequence-first global tensors, then every rank takes its slice.
  NamedTensor tokensSB{"tokens", DType::I32, {seqLen, batch}, {}};
  NamedTensor labelsSB{"labels", DType::I32, {seqLen, batch}, {}};
  std::vector<int32_t> idsSB(tokens.size()), labelsOut(tokens.size());
  // Tokens first: a bad token is named as such, not as the label before it.
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seqLen; ++s) {
      int32_t id = tokens[b * seqLen + s];
      if (!inVocab(id))
        return outside(id, b, s, "token");
      idsSB[s * batch + b] = id;
    }
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seqLen; ++s) {
      int32_t label = labels[b * seqLen + s];
      if (label != -100 && !inVocab(label))
        return outside(label, b, s, "label");
      labelsOut[s * batch + b] = label;
    }
  auto asBytes = [](const std::vector<int32_t> &values) {
    const auto *begin = reinterpret_cast<const uint8_t *>(values.data());
    return ByteVector(begin, begin + values.size() * 4);
  };
  tokensSB.bytes = asBytes(idsSB);
  labelsSB.bytes = asBytes(labelsOut);
  SHARC_TRY(scatterTensor(tokensSB, tokensIn->buffer, tokensIn->sharding));
  if (const plan::IoEntry *labelsIn = plan_.findInput("labels"))
    SHARC_TRY(scatterTensor(labelsSB, labelsIn->buffer, labelsIn->sharding));
  return Status::ok();
}

Result<NamedTensor> Runtime::gatherOutput(const std::string &name) const {
  const plan::IoEntry *entry = plan_.findOutput(name);
  if (!entry)
    entry = plan_.findInput(name);
  if (!entry)
    return Status::invalidInput("the plan has no output '" + name + "'");
  DType dtype = plan_.buffers[entry->buffer].dtype;
  return gatherTensor(name, entry->buffer, entry->globalShape, entry->sharding,
                      isFloatType(dtype) ? DType::F32 : dtype);
}

Result<NamedTensor> Runtime::gatherOutputRows(const std::string &name,
                                              int64_t firstRow,
                                              int64_t numRows) const {
  const plan::IoEntry *entry = plan_.findOutput(name);
  if (!entry)
    return Status::invalidInput("the plan has no output '" + name + "'");
  const std::vector<int64_t> &shape = entry->globalShape;
  if (shape.empty() || firstRow < 0 || numRows < 0 ||
      firstRow + numRows > shape[0])
    return Status::invalidInput("output '" + name + "' of shape " +
                                shapeText(shape) + " has no rows [" +
                                std::to_string(firstRow) + ", " +
                                std::to_string(firstRow + numRows) + ")");
  DType dtype = plan_.buffers[entry->buffer].dtype;
  return gatherTensor(name, entry->buffer, shape, entry->sharding,
                      isFloatType(dtype) ? DType::F32 : dtype,
                      {firstRow, numRows});
}

Result<TensorFile> Runtime::gatherOutputs() const {
  TensorFile file;
  for (const plan::IoEntry &entry : plan_.outputs) {
    auto tensor = gatherOutput(entry.name);
    if (!tensor)
      return tensor.status();
    file.tensors.push_back(std::move(*tensor));
  }
  return file;
}
} // namespace sharc::exec
