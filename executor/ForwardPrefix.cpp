//===- ForwardPrefix.cpp - the instructions that compute an output --------===//

#include "executor/ForwardPrefix.h"

#include <map>
#include <string>
#include <tuple>

namespace sharc::exec {
namespace {

/// A view and its base are one family (views are one level deep).
int64_t family(const plan::Plan &plan, int64_t id) {
  int64_t base = plan.buffers[id].viewOf;
  return base >= 0 ? base : id;
}

bool isPersistent(const plan::Buffer &buffer) {
  return buffer.region == plan::Region::Param ||
         buffer.region == plan::Region::OptState;
}

/// What instruction `instr` writes: its results and the operands its op
/// updates in place.
std::vector<int64_t> writes(const plan::Instruction &instr, const OpDef *def) {
  std::vector<int64_t> written = instr.results;
  for (size_t k = 0; k < instr.operands.size(); ++k)
    if (def && def->updates(k))
      written.push_back(instr.operands[k]);
  return written;
}

} // namespace

Result<std::vector<int64_t>> outputInstructions(const plan::Plan &plan,
                                                const OpTable &ops,
                                                const std::string &name) {
  const plan::IoEntry *output = plan.findOutput(name);
  if (!output)
    return Status::invalidInput("the plan has no '" + name +
                                "' output to evaluate");
  int64_t count = static_cast<int64_t>(plan.instructions.size());
  std::map<int64_t, std::vector<int64_t>> writersOf; // family -> instrs
  std::map<int64_t, int64_t> signallerOf;            // event -> instr
  std::vector<std::vector<int64_t>> written(count);
  for (int64_t i = 0; i < count; ++i) {
    const plan::Instruction &instr = plan.instructions[i];
    written[i] = writes(instr, ops.find(instr.op));
    for (int64_t id : written[i])
      writersOf[family(plan, id)].push_back(i);
    for (int64_t event : instr.signals)
      signallerOf[event] = i;
  }
  // Pipeline stages: the n-th recv of stage b from a with a tag gets the
  // n-th send of stage a to b with it, so a taken recv takes its send.
  using Link = std::tuple<int64_t, int64_t, int64_t>; // from, to, tag
  std::map<Link, std::vector<int64_t>> sendsOf;
  std::map<int64_t, int64_t> sendOfRecv;
  for (int64_t i = 0; i < count; ++i) {
    const plan::Instruction &instr = plan.instructions[i];
    if (instr.op == "send")
      sendsOf[{instr.stage, instr.getInt("peer"), instr.getInt("tag")}]
          .push_back(i);
  }
  std::map<Link, size_t> received;
  for (int64_t i = 0; i < count; ++i) {
    const plan::Instruction &instr = plan.instructions[i];
    if (instr.op != "recv")
      continue;
    Link link{instr.getInt("peer"), instr.stage, instr.getInt("tag")};
    size_t n = received[link]++;
    if (n < sendsOf[link].size())
      sendOfRecv[i] = sendsOf[link][n];
  }
  std::vector<bool> taken(count, false);
  std::vector<int64_t> work = writersOf[family(plan, output->buffer)];
  if (work.empty())
    return Status::invalidInput("no instruction writes the '" + name +
                                "' output");
  for (int64_t i : work)
    taken[i] = true;
  while (!work.empty()) {
    int64_t i = work.back();
    work.pop_back();
    auto take = [&](int64_t j) {
      if (!taken[j]) {
        taken[j] = true;
        work.push_back(j);
      }
    };
    const plan::Instruction &instr = plan.instructions[i];
    for (int64_t id : instr.operands) {
      // A key/value cache holds what earlier passes left: its reader takes
      // it as it stands, not from this program's other writers of it (a
      // decode plan's prefill and its step both write every cache).
      if (plan.buffers[id].region == plan::Region::Cache)
        continue;
      for (int64_t j : writersOf[family(plan, id)])
        if (j < i)
          take(j);
    }
    for (int64_t event : instr.waits)
      if (auto found = signallerOf.find(event); found != signallerOf.end())
        take(found->second);
    if (auto found = sendOfRecv.find(i); found != sendOfRecv.end())
      take(found->second);
  }
  std::vector<int64_t> program;
  for (int64_t i = 0; i < count; ++i) {
    if (!taken[i])
      continue;
    for (int64_t id : written[i])
      if (isPersistent(plan.buffers[id]))
        return Status::invalidInput(
            "instr " + std::to_string(i) + " (" + plan.instructions[i].op +
            ") writes " + plan::regionName(plan.buffers[id].region) +
            " buffer '" + plan.buffers[id].name + "', and the " + name +
            " depends on it: evaluating would change the model");
    program.push_back(i);
  }
  return program;
}

} // namespace sharc::exec
