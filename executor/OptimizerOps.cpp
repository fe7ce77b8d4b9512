//===- OptimizerOps.cpp - adamw instructions, alone or grouped ------------===//
//
// adamw (attrs lr, beta1, beta2, eps, weight_decay; operands param, grad,
// m, v, the first, third and fourth updated in place; kernels/AdamW.h
// states the math), clipped when a fifth operand (the squared global
// gradient norm) and max_norm are given; adamw_master (bf16-mixed: operands
// param, grad, m, v, master, then the optional norm; the f32 master is
// updated and param receives it rounded); sum_squares (kernels/SumSquares.h),
// which makes that norm's share of the rank. On a device the step's scalars
// (step, scheduled lr) come from the rank's step constants, so a captured graph
// replays with each step's values. A model's updates are many small launches
// (91 for MiniMind); on a device the runtime replaces each run of consecutive
// ones (findAdamWRuns) by one grouped launch (bindAdamWGroup).
//
//===----------------------------------------------------------------------===//

#include "executor/OpTable.h"

#include "kernels/AdamW.h"
#include "kernels/SumSquares.h"
#include "planner/plan/UpdateRuns.h"

#include <tuple>
#include <utility>

namespace sharc::exec {

using namespace opcheck;

namespace {

/// The update's tensors and hyperparameters; step and lr are the plan's.
Result<kernels::AdamWArgs> adamwArgs(const OpCall &c) {
  const plan::Instruction &instr = *c.instr;
  size_t numTensors = instr.op == "adamw_master" ? 5 : 4;
  int64_t numel = c.operands[0].numel();
  for (size_t k = 0; k < numTensors; ++k) {
    SHARC_TRY(isFloat(c.operands[k], "operand"));
    SHARC_TRY(numelIs(c.operands[k], numel, "operand"));
  }
  bool clips = c.operands.size() == numTensors + 1;
  if (clips != (instr.attrs.count("max_norm") != 0))
    return Status::invalidInput("adamw: a grad_norm_sq operand and max_norm "
                                "come together");
  kernels::AdamWArgs args{.param = c.operands[0].view(),
                          .m = c.operands[2].view(),
                          .v = c.operands[3].view(),
                          .grad = c.operands[1].cview(),
                          .numel = numel};
  if (numTensors == 5) {
    for (size_t k : {2, 3, 4})
      SHARC_TRY(dtypeIs(c.operands[k], DType::F32, "m, v and master"));
    args.master = c.operands[4].view();
  }
  args.lr = instr.getFloat("lr");
  args.beta1 = instr.getFloat("beta1");
  args.beta2 = instr.getFloat("beta2");
  args.eps = instr.getFloat("eps");
  args.weightDecay = instr.getFloat("weight_decay");
  if (clips) {
    const auto &norm = c.operands[numTensors];
    SHARC_TRY(dtypeIs(norm, DType::F32, "grad_norm_sq"));
    SHARC_TRY(numelIs(norm, 1, "grad_norm_sq"));
    args.gradNormSq = static_cast<const float *>(norm.cview().data);
    args.maxNorm = static_cast<float>(instr.getFloat("max_norm"));
  }
  return args;
}

/// A step-constants slot holding the update's scalars for each step.
int64_t reserveScalars(StepConstants &constants,
                       const kernels::AdamWArgs &args) {
  return constants.reserve(sizeof(kernels::AdamWStepScalars),
                           [args](void *slot, int64_t step, double lrScale) {
                             kernels::AdamWArgs stepArgs = args;
                             stepArgs.step = step;
                             stepArgs.lr = args.lr * lrScale;
                             *static_cast<kernels::AdamWStepScalars *>(slot) =
                                 kernels::adamwScalars(stepArgs);
                           });
}

Result<Launch> bindAdamW(const OpCall &c, const OpEnv &env) {
  auto args = adamwArgs(c);
  if (!args)
    return args.status();
  void (*cpuKernel)(const kernels::AdamWArgs &) = nullptr;
  Status (*cudaKernel)(const kernels::AdamWArgs &, kernels::DeviceStream) =
      nullptr;
  std::tie(cpuKernel, cudaKernel) = std::pair{SHARC_KERNELS(adamw)};
  if (env.onDevice && !cudaKernel)
    return Status::invalidInput("this build has no CUDA kernel for the op");
  if (env.onDevice && env.stepConstants) {
    int64_t offset = reserveScalars(*env.stepConstants, *args);
    return Launch([args = *args, cudaKernel,
                   offset](const LaunchContext &context) {
      if (!context.stepConstants)
        return Status::runtimeError("adamw: the rank has no step constants");
      kernels::AdamWArgs stepArgs = args;
      stepArgs.nonFinite = context.nonFinite;
      stepArgs.deviceScalars =
          reinterpret_cast<const kernels::AdamWStepScalars *>(
              static_cast<const char *>(context.stepConstants) + offset);
      return cudaKernel(stepArgs, context.stream);
    });
  }
  // The cpu takes the step number and the scheduled lr from the context.
  return Launch([args = *args, cpuKernel, cudaKernel,
                 onDevice = env.onDevice](const LaunchContext &context) {
    kernels::AdamWArgs stepArgs = args;
    stepArgs.nonFinite = context.nonFinite;
    stepArgs.step = context.step;
    stepArgs.lr = args.lr * context.lrScale;
    if (onDevice)
      return cudaKernel(stepArgs, context.stream);
    cpuKernel(stepArgs);
    return Status::ok();
  });
}

} // namespace

std::vector<AdamWRun> findAdamWRuns(const plan::Plan &plan) {
  std::vector<AdamWRun> runs;
  const auto &instrs = plan.instructions;
  auto slot = [&](size_t k) {
    return plan::UpdateSlot{.op = instrs[k].op,
                            .stream = instrs[k].stream,
                            .stage = instrs[k].stage,
                            .waits = !instrs[k].waits.empty(),
                            .signals = !instrs[k].signals.empty()};
  };
  for (size_t i = 0; i < instrs.size();) {
    size_t last = i;
    while (last + 1 < instrs.size() &&
           plan::joinsUpdateRun(slot(last), slot(last + 1)))
      ++last;
    if (last > i)
      runs.push_back({static_cast<int64_t>(i), static_cast<int64_t>(last)});
    i = last + 1;
  }
  return runs;
}

Result<Launch> bindAdamWGroup(const std::vector<const OpCall *> &calls,
                              const OpEnv &env) {
  if (!env.onDevice || !env.stepConstants)
    return Status::invalidInput(
        "grouped adamw runs on a device with step constants");
#if SHARC_WITH_CUDA
  std::vector<kernels::AdamWArgs> members;
  std::vector<int64_t> offsets;
  for (const OpCall *call : calls) {
    auto args = adamwArgs(*call);
    if (!args)
      return args.status();
    members.push_back(*args);
    offsets.push_back(reserveScalars(*env.stepConstants, *args));
  }
  auto group = kernels::cuda::AdamWGroup::create(members, offsets);
  if (!group)
    return group.status();
  // A Launch is copied; the group's device tables are shared.
  std::shared_ptr<const kernels::cuda::AdamWGroup> shared = std::move(*group);
  return Launch([shared](const LaunchContext &context) {
    return shared->run(context.stepConstants, context.nonFinite,
                       context.stream);
  });
#else
  return Status::invalidInput("this build has no CUDA kernel for the op");
#endif
}

namespace {

Result<Launch> bindSumSquares(const OpCall &c, const OpEnv &env) {
  const plan::Instruction &instr = *c.instr;
  kernels::SumSquaresArgs args;
  args.replicas = instr.getInts("replicas");
  if (args.replicas.size() != c.operands.size())
    return Status::invalidInput("sum_squares: replicas needs one entry per "
                                "operand");
  for (size_t k = 0; k < c.operands.size(); ++k) {
    SHARC_TRY(isFloat(c.operands[k], "x"));
    SHARC_TRY(positiveAttr("replicas", args.replicas[k]));
    args.xs.push_back(c.operands[k].cview());
    args.numels.push_back(c.operands[k].numel());
  }
  SHARC_TRY(dtypeIs(c.results[0], DType::F32, "sum"));
  SHARC_TRY(numelIs(c.results[0], 1, "sum"));
  args.sum = static_cast<float *>(c.results[0].view().data);
  if (!env.onDevice)
    return Launch([args](const LaunchContext &) {
      kernels::cpu::sumSquares(args);
      return Status::ok();
    });
#if SHARC_WITH_CUDA
  auto op = kernels::cuda::SumSquares::create(args);
  if (!op)
    return op.status();
  // A Launch is copied; the device tables are shared.
  std::shared_ptr<const kernels::cuda::SumSquares> shared = std::move(*op);
  return Launch([shared](const LaunchContext &context) {
    return shared->run(context.stream);
  });
#else
  return Status::invalidInput("this build has no CUDA kernel for the op");
#endif
}

} // namespace

void addOptimizerOps(std::unordered_map<std::string, OpDef> &table) {
  table["adamw"] = {bindAdamW, 5, 0, /*param, m, v*/ 0b1101,
                    /*optionalOperands=*/1};
  table["adamw_master"] = {bindAdamW, 6, 0, /*param, m, v, master*/ 0b11101,
                           /*optionalOperands=*/1};
  table["sum_squares"] = {bindSumSquares, OpDef::kOneOrMore, 1};
}

} // namespace sharc::exec
