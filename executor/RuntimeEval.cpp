//===- RuntimeEval.cpp - evaluation: the instructions of one output ------===//
//
// Runtime's evaluation (the loss for validation, the logits for
// generation) runs the subset of the step that one output depends on
// (ForwardPrefix.h), in plan order. Transfers that the step posts as one
// group (groupTransfers) keep their group where evaluation takes all of
// it, and shrink to the members it takes otherwise (partialGroups).
//
//===----------------------------------------------------------------------===//

#include "executor/ForwardPrefix.h"
#include "executor/Runtime.h"

namespace sharc::exec {

namespace {
/// One launch posting `launches` (transfers) as one group.
Launch groupedLaunch(std::vector<Launch> launches) {
  return [launches = std::move(launches)](const LaunchContext &context) {
    SHARC_TRY(context.comm->beginTransfers());
    for (const Launch &launch : launches)
      if (Status status = launch(context); !status) {
        (void)context.comm->endTransfers();
        return status;
      }
    return context.comm->endTransfers();
  };
}

Status doNothing(const LaunchContext &) { return Status::ok(); }
} // namespace

Runtime::LaunchOverrides
Runtime::partialGroups(const RankState &rank,
                       const std::vector<bool> &taken) const {
  LaunchOverrides overrides;
  for (const std::vector<int64_t> &group : rank.transferGroups) {
    std::vector<int64_t> members;
    for (int64_t i : group)
      if (taken[i])
        members.push_back(i);
    if (members.empty() || members.size() == group.size())
      continue;
    std::vector<Launch> launches;
    for (int64_t i : members) {
      launches.push_back(rank.program[i].alone);
      overrides[i] = doNothing;
    }
    overrides[members.front()] = members.size() == 1
                                     ? rank.program[members.front()].alone
                                     : groupedLaunch(std::move(launches));
  }
  return overrides;
}

Status Runtime::groupTransfers(RankState &rank) {
  auto isTransfer = [](const plan::Instruction &instr) {
    return instr.op == "send" || instr.op == "recv" || instr.op == "ring_shift";
  };
  // Per stream, the run being collected: this rank's instructions only.
  std::vector<std::vector<int64_t>> runs(plan_.numStreams);
  auto close = [&](std::vector<int64_t> &run) {
    if (run.size() > 1) {
      std::vector<Launch> launches;
      for (int64_t i : run) {
        rank.program[i].alone = std::move(rank.program[i].launch);
        launches.push_back(rank.program[i].alone);
      }
      rank.program[run.front()].launch = groupedLaunch(std::move(launches));
      for (size_t k = 1; k < run.size(); ++k)
        rank.program[run[k]].launch = doNothing;
      rank.transferGroups.push_back(run);
    }
    run.clear();
  };
  for (size_t i = 0; i < plan_.instructions.size(); ++i) {
    const plan::Instruction &instr = plan_.instructions[i];
    if (instr.stage >= 0 && instr.stage != rank.stage)
      continue;
    std::vector<int64_t> &run = runs[instr.stream];
    bool joins = isTransfer(instr) && !run.empty() && instr.waits.empty() &&
                 plan_.instructions[run.back()].signals.empty();
    if (!joins) {
      close(run);
      if (!isTransfer(instr))
        continue;
    }
    run.push_back(static_cast<int64_t>(i));
  }
  for (std::vector<int64_t> &run : runs)
    close(run);
  return Status::ok();
}

Status Runtime::runOutputPrefix(const std::string &name) {
  auto found = evalPrograms_.find(name);
  if (found == evalPrograms_.end()) {
    auto instrs = outputInstructions(plan_, OpTable::get(), name);
    if (!instrs)
      return instrs.status().withContext("evaluation");
    EvalProgram program;
    program.order = std::move(*instrs);
    program.graphSlot = static_cast<int64_t>(evalPrograms_.size()) + 1;
    std::vector<bool> taken(plan_.instructions.size(), false);
    for (int64_t i : program.order)
      taken[i] = true;
    for (const auto &rank : ranks_)
      program.launches.push_back(partialGroups(*rank, taken));
    found = evalPrograms_.emplace(name, std::move(program)).first;
  }
  // In plan order across streams: the schedule orders an instruction after
  // work that evaluation leaves out (a transfer after the backward's, on
  // its stream), which ordered it after other readers of the bytes it
  // writes; one after another, every such order holds (and a serial pass
  // needs no per-stream lists). Captured as a graph from its second run
  // on, as the step is (generation runs one program a token).
  EvalProgram &program = found->second;
  int64_t graphSlot = program.runs++ > 0 ? program.graphSlot : -1;
  return runProgram({}, program.order, /*record=*/false, &program.launches,
                    /*serial=*/true, graphSlot);
}

Result<double> Runtime::evalLoss() {
  SHARC_TRY(runOutputPrefix("loss"));
  return readLoss();
}

Result<plan::NamedTensor> Runtime::evalOutput(const std::string &name,
                                              int64_t firstRow,
                                              int64_t numRows) {
  SHARC_TRY(runOutputPrefix(name));
  if (numRows < 0)
    return gatherOutput(name);
  return gatherOutputRows(name, firstRow, numRows);
}

} // namespace sharc::exec
