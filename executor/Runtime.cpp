//===- Runtime.cpp - runs a plan: per-rank arenas, threads, steps ---------===//

#include "executor/Runtime.h"
#include "executor/PlanRecordChecks.h"

#include "executor/ShardLayout.h"
#include "planner/plan/PlanContract.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <system_error>
#include <thread>

namespace sharc::exec {

using plan::Buffer;
using plan::NamedTensor;
using plan::ParamEntry;
using plan::TensorFile;

namespace {

std::string instrContext(int64_t rank, size_t index,
                         const plan::Instruction &instr) {
  // The model line that made the instruction, where the plan records it.
  return "rank " + std::to_string(rank) + ", instr " + std::to_string(index) +
         " (" + instr.op + (instr.loc.empty() ? "" : " from " + instr.loc) +
         ")";
}

} // namespace

Runtime::Runtime(const plan::Plan &plan, const RunOptions &options)
    : plan_(plan), options_(options) {}

Runtime::~Runtime() = default;

Result<std::unique_ptr<Runtime>> Runtime::create(const plan::Plan &plan,
                                                 const RunOptions &options) {
  std::unique_ptr<Runtime> runtime(new Runtime(plan, options));
  SHARC_TRY(runtime->setUp());
  return runtime;
}

Status Runtime::setUp() {
  SHARC_TRY(checkPlanRecords(plan_));
  auto order = analyzeStreams(plan_);
  if (!order)
    return order.status();
  order_ = std::move(*order);
  processes_ = options_.processes ? options_.processes : singleProcess();
  auto span = processes_->span(plan_.worldSize());
  if (!span)
    return span.status();
  span_ = *span;
  // A trace is written from one process's clock.
  if (processes_->count() > 1 && options_.recordTrace)
    return Status::invalidInput("a trace is recorded by one process "
                                "driving every rank: launch without mpirun");
  auto backend = createBackend(
      options_.backend, plan_,
      BackendOptions{.timeoutSeconds = options_.collectiveTimeoutSeconds,
                     .poisonActivations = options_.poisonActivations,
                     .profile = options_.recordTrace,
                     .span = span_,
                     .processes = processes_.get(),
                     .shareGpus = options_.shareGpus});
  if (!backend)
    return backend.status();
  backend_ = std::move(*backend);
  for (size_t i = 0; i < plan_.instructions.size(); ++i)
    planOrder_.push_back(static_cast<int64_t>(i));
  for (int64_t r = span_.first; r < span_.first + span_.count; ++r) {
    auto device = backend_->createRank(r);
    if (!device)
      return device.status().withContext("rank " + std::to_string(r));
    auto state = std::make_unique<RankState>();
    state->rank = r;
    state->device = std::move(*device);
    state->stage = stageOfRank(plan_.mesh, r);
    state->env = OpEnv{.mesh = &plan_.mesh,
                       .coords = meshCoords(plan_.mesh, r),
                       .onDevice = backend_->enqueues(),
                       .scratchBytes = nullptr,
                       .gemms = {},
                       .attentions = {}};
    if (backend_->enqueues())
      for (int64_t stream = 0; stream < plan_.numStreams; ++stream) {
        const LaunchContext &context = state->device->context(stream);
        state->env.gemms.push_back(context.gemm);
        state->env.attentions.push_back(context.attention);
      }
    SHARC_TRY(bindRank(*state));
    ranks_.push_back(std::move(state));
  }
  if (options_.checkHazards) {
    std::vector<uint32_t> updatedOperands;
    for (const BoundInstr &bound : ranks_[0]->program)
      updatedOperands.push_back(bound.def->updatedOperands);
    SHARC_TRY(findHazard(plan_, order_, updatedOperands));
    poisonAfter_ = lastUses(plan_, order_);
    hasViews_.assign(plan_.buffers.size(), false);
    for (const plan::Buffer &buffer : plan_.buffers)
      if (buffer.viewOf >= 0)
        hasViews_[buffer.viewOf] = true;
  }
  // Plans read from a file were checked by the reader; plans built in
  // memory (tests, the numerics suite) meet the same contract here.
  SHARC_TRY(plan::checkPlanContract(plan_));
  return Status::ok();
}

Status Runtime::bindRank(RankState &rank) {
  rank.program.clear();
  rank.transferGroups.clear();
  // The binds raise each stream's scratch; the device allocates it once.
  std::vector<int64_t> scratchBytes(static_cast<size_t>(plan_.numStreams), 0);
  rank.env.scratchBytes = &scratchBytes;
  rank.stepConstants = StepConstants();
  rank.env.stepConstants = backend_->enqueues() ? &rank.stepConstants : nullptr;
  Status status = bindInstrs(rank);
  if (status)
    status = groupTransfers(rank);
  // Checking mode keeps one launch per update, so a non-finite parameter
  // is named by its own instruction.
  if (status && rank.env.stepConstants && !options_.checkHazards)
    status = groupAdamW(rank);
  rank.env.scratchBytes = nullptr;
  rank.env.stepConstants = nullptr;
  if (!status)
    return status;
  std::string context = "rank " + std::to_string(rank.rank);
  SHARC_TRY(rank.device->allocateScratch(scratchBytes).withContext(context));
  rank.stepTable.assign(static_cast<size_t>(rank.stepConstants.bytes()), 0);
  return rank.device->allocateStepConstants(rank.stepConstants.bytes())
      .withContext(context);
}

Status Runtime::checkFinite(RankState &rank, const BoundInstr &bound) {
  const plan::Instruction &instr = *bound.call.instr;
  // column_insert writes one block of columns of its result; the others
  // are its siblings' (a fused weight's gradient), so the result is only
  // whole after the last of them, whose readers are checked in turn.
  if (instr.op == "column_insert")
    return Status::ok();
  std::vector<const TensorRef *> written;
  // A workspace result holds the kernel's scratch, not a value.
  size_t values = bound.call.results.size();
  if (bound.def->workspaceResults > 0)
    values = std::min(values, static_cast<size_t>(bound.def->numResults -
                                                  bound.def->workspaceResults));
  for (size_t k = 0; k < values; ++k)
    written.push_back(&bound.call.results[k]);
  for (size_t k = 0; k < bound.call.operands.size(); ++k)
    if (bound.def->updates(k))
      written.push_back(&bound.call.operands[k]);
  for (const TensorRef *ref : written) {
    // A slab others view (a DDP bucket) may hold alignment gaps no view
    // covers, whose bytes are whatever was there; its views are checked
    // where they are written and read.
    // A column view's elements are not contiguous; its base is checked by
    // the instruction that writes the whole of it, its readers in turn.
    if (ref->dtype() == DType::I32 || hasViews_[ref->buffer->id] ||
        ref->buffer->isStrided())
      continue;
    auto count = rank.device->countNonFinite(instr.stream, ref->data,
                                             ref->dtype(), ref->numel());
    if (!count)
      return count.status();
    if (*count > 0)
      return Status::runtimeError(
          "step " + std::to_string(nextStep_) + ": the first output to go " +
          "non-finite: '" + ref->buffer->name + "' holds " +
          std::to_string(*count) + " NaN or infinite values of " +
          std::to_string(ref->numel()));
  }
  return Status::ok();
}

Status Runtime::groupAdamW(RankState &rank) {
  // SHARC_ADAMW_GROUPS=0 keeps one launch per update (to compare).
  const char *groups = std::getenv("SHARC_ADAMW_GROUPS");
  if (groups && std::string(groups) == "0")
    return Status::ok();
  for (const AdamWRun &run : findAdamWRuns(plan_)) {
    // A run is one stage's (joinsUpdateRun); another stage's instructions
    // are not bound on this rank.
    int64_t stage = plan_.instructions[run.first].stage;
    if (stage >= 0 && stage != rank.stage)
      continue;
    std::vector<const OpCall *> calls;
    for (int64_t i = run.first; i <= run.last; ++i)
      calls.push_back(&rank.program[i].call);
    auto launch = bindAdamWGroup(calls, rank.env);
    if (!launch)
      return launch.status().withContext(
          instrContext(rank.rank, run.first, plan_.instructions[run.first]));
    // The first instruction updates the whole run; the rest are done by
    // then (their trace spans are empty).
    rank.program[run.first].launch = std::move(*launch);
    for (int64_t i = run.first + 1; i <= run.last; ++i)
      rank.program[i].launch = [](const LaunchContext &) {
        return Status::ok();
      };
  }
  return Status::ok();
}

Status Runtime::enqueueStep(RankState &rank, const std::vector<int64_t> &order,
                            int64_t graphSlot, const LaunchOverrides *overrides,
                            bool serial) {
  rank.stepConstants.fillAll(rank.stepTable.data(), nextStep_, lrScale_);
  SHARC_TRY(rank.device->uploadStepConstants(
      rank.stepTable.data(), static_cast<int64_t>(rank.stepTable.size())));
  if (graphSlot < 0)
    return runInstrs(rank, order, nullptr, overrides, serial);
  if (!rank.device->hasCaptured(graphSlot)) {
    SHARC_TRY(rank.device->beginCapture(graphSlot));
    Status enqueued = runInstrs(rank, order, nullptr, overrides, serial);
    // Always end the capture: the streams must leave capture mode.
    Status ended = rank.device->endCapture(graphSlot);
    SHARC_TRY(enqueued);
    SHARC_TRY(ended.withContext("capturing the pass as a CUDA graph"));
  }
  return rank.device->replayCaptured(graphSlot);
}

Status Runtime::bindInstrs(RankState &rank) {
  const OpTable &table = OpTable::get();
  for (size_t i = 0; i < plan_.instructions.size(); ++i) {
    const plan::Instruction &instr = plan_.instructions[i];
    std::string context = instrContext(rank.rank, i, instr);
    BoundInstr bound;
    bound.def = table.find(instr.op);
    if (!bound.def)
      return Status::invalidInput(context + ": unknown op '" + instr.op + "'");
    const OpDef &def = *bound.def;
    auto numIn = static_cast<int>(instr.operands.size());
    auto numOut = static_cast<int>(instr.results.size());
    bool countsOk = def.numOperands == OpDef::kVariadic
                        ? numIn == numOut && numIn > 0
                    : def.numOperands == OpDef::kOneOrMore
                        ? numIn > 0 && numOut == def.numResults
                        : numIn <= def.numOperands &&
                              numIn >= def.numOperands - def.optionalOperands &&
                              numOut <= def.numResults &&
                              numOut >= def.numResults - def.workspaceResults;
    auto range = [](int most, int optional) {
      return optional > 0 ? std::to_string(most - optional) + " to " +
                                std::to_string(most)
                          : std::to_string(most);
    };
    if (!countsOk)
      return Status::invalidInput(
          context + ": expected " +
          range(def.numOperands, def.optionalOperands) + " operands and " +
          range(def.numResults, def.workspaceResults) + " results, got " +
          std::to_string(instr.operands.size()) + " and " +
          std::to_string(instr.results.size()));
    bound.call.instr = &instr;
    if (instr.stage >= 0 && instr.stage != rank.stage) {
      rank.program.push_back(std::move(bound)); // never bound nor run
      continue;
    }
    for (int64_t id : instr.operands)
      bound.call.operands.push_back(
          {&plan_.buffers[id], rank.device->at(plan_.buffers[id])});
    for (int64_t id : instr.results)
      bound.call.results.push_back(
          {&plan_.buffers[id], rank.device->at(plan_.buffers[id])});
    SHARC_TRY(checkPacked(*bound.def, bound.call).withContext(context));
    auto launch = bound.def->bind(bound.call, rank.env);
    if (!launch)
      return launch.status().withContext(context);
    bound.launch = std::move(*launch);
    rank.program.push_back(std::move(bound));
  }
  return Status::ok();
}

void *Runtime::storage(int64_t rank, int64_t bufferId) const {
  return local(rank).device->at(plan_.buffers[bufferId]);
}

Status Runtime::runInstrs(RankState &rank, const std::vector<int64_t> &indices,
                          std::vector<TraceRecord> *trace,
                          const LaunchOverrides *overrides, bool serial) {
  RankDevice &device = *rank.device;
  // On a device the host clock only sees the enqueue: time with events.
  bool timed = options_.recordTrace && backend_->enqueues();
  auto sinceStart = [this] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now() - stepStart_)
        .count();
  };
  int64_t lastStream = -1;
  for (int64_t index : indices) {
    const BoundInstr &bound = rank.program[index];
    const plan::Instruction &instr = *bound.call.instr;
    // Another pipeline stage's: its events are that stage's too.
    if (instr.stage >= 0 && instr.stage != rank.stage)
      continue;
    int64_t stream = instr.stream;
    if (serial && lastStream >= 0 && lastStream != stream)
      if (Status status = device.order(lastStream, stream); !status)
        return status.withContext(instrContext(rank.rank, index, instr));
    lastStream = stream;
    for (int64_t event : instr.waits)
      if (Status status = device.wait(stream, event); !status)
        return status.withContext(instrContext(rank.rank, index, instr));
    // The span starts after the waits: waiting is idle time, not the op's.
    int64_t startNs = trace ? sinceStart() : 0;
    if (timed)
      SHARC_TRY(device.beginTimed(stream, index));
    LaunchContext context = device.context(stream);
    context.step = nextStep_;
    context.lrScale = lrScale_;
    const Launch *launch = &bound.launch;
    if (overrides)
      if (auto found = overrides->find(index); found != overrides->end())
        launch = &found->second;
    if (Status status = (*launch)(context); !status)
      return status.withContext(instrContext(rank.rank, index, instr));
    if (timed)
      SHARC_TRY(device.endTimed(stream, index));
    if (trace)
      trace->push_back({index, startNs, sinceStart()});
    if (options_.checkHazards)
      if (Status status = checkFinite(rank, bound); !status)
        return status.withContext(instrContext(rank.rank, index, instr));
    if (!poisonAfter_.empty())
      for (int64_t id : poisonAfter_[index])
        SHARC_TRY(device.fill(stream, storage(rank.rank, id), 0xff,
                              plan_.buffers[id].numBytes));
    for (int64_t event : instr.signals)
      if (Status status = device.signal(stream, event); !status)
        return status.withContext(instrContext(rank.rank, index, instr));
  }
  return Status::ok();
}

void Runtime::abortAll() {
  backend_->abort();
  for (auto &rank : ranks_)
    rank->device->abort();
}

Result<StepStats> Runtime::step() {
  auto start = std::chrono::steady_clock::now();
  // Once per step: every stream thread only reads it.
  lrScale_ = plan_.lrSchedule.factor(nextStep_);
  // Only whole training steps are captured, after an eager first one.
  SHARC_TRY(runProgram(order_.streamInstrs, planOrder_, options_.recordTrace,
                       nullptr, false, nextStep_ > 1 ? 0 : -1));
  StepStats stats;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  bool nonFinite = false;
  for (auto &rank : ranks_)
    nonFinite = rank->device->takeNonFiniteUpdate() || nonFinite;
  // The slowest process's time; whether any process's updates stored a
  // NaN, so that all of them stop at the same step.
  auto maxima = processes_->max({seconds, nonFinite ? 1.0 : 0.0});
  if (!maxima)
    return maxima.status();
  stats.seconds = (*maxima)[0];
  stats.nonFiniteUpdate = (*maxima)[1] > 0;
  stats.loss = std::numeric_limits<double>::quiet_NaN();
  if (plan_.findOutput("loss")) {
    auto loss = readLoss();
    if (!loss)
      return loss.status();
    stats.loss = *loss;
  }
  if (const plan::IoEntry *normSq = plan_.findOutput("grad_norm_sq")) {
    auto value = readScalar(*normSq);
    if (!value)
      return value.status();
    stats.gradNorm = std::sqrt(*value);
  }
  if (options_.recordTrace)
    std::swap(recording_, lastTrace_);
  ++nextStep_;
  return stats;
}

Result<double> Runtime::readLoss() const {
  return readScalar(*plan_.findOutput("loss"));
}

Result<double> Runtime::readScalar(const plan::IoEntry &entry) const {
  const Buffer &buffer = plan_.buffers[entry.buffer];
  // The first owner's (rank 0, or the first rank of the stage that
  // computes it), whose process sends it to the others.
  int64_t owner = 0;
  while (
      owner + 1 < span_.world &&
      !isShardOwner(plan_.mesh, entry.sharding, meshCoords(plan_.mesh, owner)))
    ++owner;
  double value = 0;
  if (span_.holds(owner)) {
    double word = 0; // room for any dtype's one element
    SHARC_TRY(local(owner).device->download(&word, storage(owner, entry.buffer),
                                            dtypeSize(buffer.dtype)));
    value = kernels::loadElement({&word, buffer.dtype}, 0);
  }
  SHARC_TRY(processes_->broadcast(&value, sizeof(value), owner / span_.count));
  return value;
}

Status
Runtime::runProgram(const std::vector<std::vector<int64_t>> &streamInstrs,
                    const std::vector<int64_t> &order, bool record,
                    const std::vector<LaunchOverrides> *overrides, bool serial,
                    int64_t graphSlot) {
  // One task per (rank, stream) that has work on the cpu; one per rank,
  // every instruction in plan order, where launches are enqueued (and the
  // rank's thread begins its step, since a CUDA device is per thread).
  bool enqueues = backend_->enqueues();
  for (auto &rank : ranks_) {
    if (options_.poisonActivations)
      SHARC_TRY(rank->device->poisonActivations());
    if (!enqueues)
      rank->device->beginStep();
  }
  // (index into ranks_, stream or -1)
  std::vector<std::pair<int64_t, int64_t>> tasks;
  for (int64_t r = 0; r < span_.count; ++r) {
    if (enqueues || serial) {
      tasks.push_back({r, -1});
      continue;
    }
    for (int64_t s = 0; s < order_.numStreams; ++s)
      if (!streamInstrs[s].empty())
        tasks.push_back({r, s});
  }
  if (record) {
    // Sized once; clear() keeps each vector's capacity, so a stream thread
    // never allocates while it is timed after the first step.
    recording_.step = nextStep_;
    recording_.records.resize(ranks_.size());
    for (auto &streams : recording_.records) {
      streams.resize(order_.numStreams);
      for (size_t s = 0; s < streams.size(); ++s) {
        streams[s].clear();
        streams[s].reserve(streamInstrs[s].size());
      }
    }
  }
  // Tracing, poisoning and checking act between instructions: eager.
  bool capture = graphSlot >= 0 && options_.captureSteps && enqueues &&
                 !record && !options_.poisonActivations &&
                 !options_.checkHazards && ranks_[0]->device->canCapture();
  std::vector<Status> statuses(tasks.size());
  // The first task to fail holds the cause; it aborts the collectives and
  // event waits the others are in, whose errors only say they were aborted.
  std::atomic<int64_t> firstFailure{-1};
  auto runOne = [&](size_t t) {
    auto [r, s] = tasks[t];
    RankState &rank = *ranks_[r];
    const LaunchOverrides *mine = overrides ? &(*overrides)[r] : nullptr;
    if (s < 0) {
      rank.device->beginStep();
      statuses[t] =
          enqueues
              ? enqueueStep(rank, order, capture ? graphSlot : -1, mine, serial)
              : runInstrs(rank, order, nullptr, mine, serial);
      if (statuses[t])
        statuses[t] = rank.device->finishStep().withContext(
            "rank " + std::to_string(rank.rank));
      if (statuses[t] && record) {
        auto timings = rank.device->timings();
        if (timings)
          recording_.records[r] = std::move(*timings);
        else
          statuses[t] = timings.status();
      }
    } else {
      statuses[t] =
          runInstrs(rank, streamInstrs[s],
                    record ? &recording_.records[r][s] : nullptr, mine);
    }
    if (!statuses[t]) {
      int64_t none = -1;
      firstFailure.compare_exchange_strong(none, static_cast<int64_t>(t));
      abortAll();
    }
  };
  // Taken once, before any stream starts; the threads only read it.
  stepStart_ = std::chrono::steady_clock::now();
  if (tasks.size() == 1) {
    runOne(0);
  } else {
    // The streams wait for one another, so every one needs its thread: a
    // thread the host cannot start fails the step, and wakes the started
    // ones' waits (a thrown start with threads still joinable would end
    // the process).
    std::vector<std::thread> threads;
    threads.reserve(tasks.size());
    for (size_t t = 0; t < tasks.size(); ++t) {
      try {
        threads.emplace_back(runOne, t);
      } catch (const std::system_error &error) {
        statuses[t] = Status::runtimeError(
            std::string("could not start a host thread for a stream: ") +
            error.what());
        int64_t none = -1;
        firstFailure.compare_exchange_strong(none, static_cast<int64_t>(t));
        abortAll();
        break;
      }
    }
    for (std::thread &thread : threads)
      thread.join();
  }
  if (firstFailure.load() >= 0) {
    backend_->cancelEnqueued();
    backend_->reset();
    return statuses[firstFailure.load()];
  }
  return Status::ok();
}

std::vector<int64_t> Runtime::deviceBytesInUse() const {
  std::vector<int64_t> bytes;
  for (const auto &rank : ranks_)
    bytes.push_back(rank->device->deviceBytesInUse());
  return bytes;
}

std::vector<int64_t> Runtime::workspaceBytes() const {
  std::vector<int64_t> bytes;
  for (const auto &rank : ranks_)
    bytes.push_back(rank->device->workspaceBytes());
  return bytes;
}

Result<std::string> Runtime::lastStepTrace() const {
  if (!options_.recordTrace)
    return Status::runtimeError(
        "no trace: the runtime was created without recordTrace");
  if (lastTrace_.records.empty())
    return Status::runtimeError("no trace: no step has succeeded yet");
  return chromeTrace(plan_, lastTrace_);
}

} // namespace sharc::exec
