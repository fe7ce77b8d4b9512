//===- OpTable.h - plan ops: bind once, launch every step -------*- C++ -*-===//
// defines: TensorRef, OpCall, OpEnv, LaunchContext, Launch, BindFn, OpDef,
//          GemmEngine, OpTable, launchKernel, launchKernelWithScratch,
//          streamAttention, prepareOnLibrary, libraryLaunchOnScratch
//
// Every op of docs/plan-ops.md has one bind function, shared by all
// backends. Bind runs once per rank at set-up: it reads and checks the
// instruction's attributes and its buffers' dtypes and shapes, derives the
// kernel's sizes, fills the kernel's argument struct (kernels/*.h) and
// returns a Launch that only calls the kernel. A plan error therefore shows
// at set-up, and a step does no checking. The backend chooses the kernel:
// OpEnv::onDevice picks kernels::cuda over kernels::cpu. A device kernel
// that needs scratch memory (partial sums of a reduction) declares its size
// at bind (OpEnv::needScratch); the backend allocates the largest size per
// stream once, after binding, and hands it to every launch on that stream
// in LaunchContext::scratch, so a step never allocates.
//
//   const OpDef *def = OpTable::get().find("rms_norm");
//   Result<Launch> launch = def->bind(call, env);       // at set-up
//   SHARC_TRY((*launch)(LaunchContext{.stream = s}));   // every step
#pragma once

#include "executor/Communicator.h"
#include "kernels/Attention.h"
#include "kernels/DecodeAttention.h"
#include "kernels/Matmul.h"
#include "kernels/TensorView.h"
#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace sharc::exec {

/// A buffer bound to its storage on one rank (device memory on a device
/// backend: bind never dereferences it).
struct TensorRef {
  const plan::Buffer *buffer = nullptr;
  void *data = nullptr;

  DType dtype() const { return buffer->dtype; }
  const std::vector<int64_t> &shape() const { return buffer->shape; }
  int64_t numel() const;
  kernels::TensorView view() const { return {data, buffer->dtype}; }
  kernels::ConstTensorView cview() const { return {data, buffer->dtype}; }
};

struct OpCall {
  const plan::Instruction *instr = nullptr;
  std::vector<TensorRef> operands;
  std::vector<TensorRef> results;
};

class GemmEngine;
class AttentionEngine;

/// Per-step values that device launches read from device memory instead of
/// their arguments, so that a step captured once as a CUDA graph replays
/// with each step's values (adamw's step and scheduled lr). Bind reserves a
/// slot and says how to fill it; before each step the runtime fills every
/// slot on the host and the rank device uploads the table, whose device
/// address launches find in LaunchContext::stepConstants.
class StepConstants {
public:
  using Fill = std::function<void(void *slot, int64_t step, double lrScale)>;
  /// A slot of `bytes` (16-byte aligned); its offset in the table.
  int64_t reserve(int64_t bytes, Fill fill);
  int64_t bytes() const { return bytes_; }
  /// Writes every slot for `step` into `table` (bytes() of host memory).
  void fillAll(void *table, int64_t step, double lrScale) const;

private:
  std::vector<std::pair<int64_t, Fill>> slots_;
  int64_t bytes_ = 0;
};

/// What bind may read besides the buffers: the rank's place in the mesh.
struct OpEnv {
  const std::vector<plan::MeshAxis> *mesh = nullptr;
  std::vector<int64_t> coords; ///< this rank's mesh coordinates
  /// Launch kernels::cuda on a device stream instead of kernels::cpu.
  bool onDevice = false;
  /// Scratch bytes per stream the bound launches need (the runtime's, set
  /// while it binds a rank); needScratch raises them.
  std::vector<int64_t> *scratchBytes = nullptr;
  /// The GEMM engine of each stream on a device backend (empty on the cpu),
  /// so a GEMM's algorithm is chosen at bind.
  std::vector<GemmEngine *> gemms;
  /// The fused-attention library of each stream on a device backend (empty,
  /// or null entries, where there is none: the backend's own kernel runs).
  std::vector<AttentionEngine *> attentions;
  /// The rank's step constants on a device backend (null on the cpu, whose
  /// launches take the step from LaunchContext).
  StepConstants *stepConstants = nullptr;

  /// Coordinate along `axis`, 0 for an axis the mesh lacks.
  int64_t coord(const std::string &axis) const;
  /// Where this rank's contiguous block of `localExtent` elements starts
  /// along a dimension split over the axis named by the instruction's
  /// attribute `axisAttr` (vocab_axis, position_axis); 0 when absent.
  int64_t blockStart(const plan::Instruction &instr, const char *axisAttr,
                     int64_t localExtent) const;
  /// Size of `axis`, 1 for an axis the mesh lacks (as Plan::axisSize).
  int64_t axisSize(const std::string &axis) const;
  /// Global positions of this rank's `localRows` rows of a sequence:
  /// position_offset, plus with position_axis the rank's part of the
  /// sequence split over it, contiguous or (position_split "balanced")
  /// chunks coord and 2n-1-coord of 2n (kernels/SequencePositions.h).
  kernels::RowPositions rowPositions(const plan::Instruction &instr,
                                     int64_t localRows) const;
  /// The instruction's launch needs `bytes` of scratch on its stream.
  void needScratch(const plan::Instruction &instr, int64_t bytes) const;
};

/// The device GEMMs (cuBLASLt on cuda); the cpu backend has none.
class GemmEngine {
public:
  virtual ~GemmEngine() = default;
  virtual Status matmul(const kernels::MatmulArgs &args,
                        kernels::DeviceStream stream) = 0;
  virtual Status matmulDgrad(const kernels::MatmulDgradArgs &args,
                             kernels::DeviceStream stream) = 0;
  virtual Status matmulWgrad(const kernels::MatmulWgradArgs &args,
                             kernels::DeviceStream stream) = 0;
  /// Chooses and caches a product's algorithm at set-up, so that the first
  /// step does not and a shape the library cannot run fails at bind.
  virtual Status prepare(const kernels::MatmulArgs &args) = 0;
  virtual Status prepare(const kernels::MatmulDgradArgs &args) = 0;
  virtual Status prepare(const kernels::MatmulWgradArgs &args) = 0;
};

/// A library's fused causal attention (cuDNN's SDPA on cuda) for the shapes
/// it accepts; attention and attention_grad fall back to the backend's own
/// kernels for the rest (f32 plans, head dims it lacks).
class AttentionEngine {
public:
  virtual ~AttentionEngine() = default;
  /// Whether the library is asked at all for this storage type and head dim
  /// (the rest quietly run on the backend's kernel).
  virtual bool accepts(DType dtype, int64_t headDim) const = 0;
  /// Prepares the shape at set-up; its workspace bytes, or the library's
  /// refusal.
  virtual Result<int64_t> prepare(const kernels::AttentionArgs &args) = 0;
  virtual Result<int64_t> prepare(const kernels::AttentionGradArgs &args) = 0;
  virtual Status run(const kernels::AttentionArgs &args, void *workspace) = 0;
  virtual Status run(const kernels::AttentionGradArgs &args,
                     void *workspace) = 0;
  /// decode_attention's prefill path (kernels/DecodeAttention.h): whether
  /// the library is asked for this step (bf16 rows, a head dim it takes),
  /// then as for attention, prepare's bytes are the launch's scratch.
  virtual bool accepts(const kernels::DecodeAttentionArgs &) const {
    return false;
  }
  virtual Result<int64_t> prepare(const kernels::DecodeAttentionArgs &) {
    return Status::invalidInput("no prefill path in this attention library");
  }
  virtual Status run(const kernels::DecodeAttentionArgs &, void *) {
    return Status::invalidInput("no prefill path in this attention library");
  }
};

/// What a launch gets at run time: the stream it runs on (null on the cpu),
/// that stream's communicator, GEMM and attention engines, the stream's
/// scratch memory (device memory; none on the cpu) and the step.
struct LaunchContext {
  kernels::DeviceStream stream = nullptr;
  Communicator *comm = nullptr;
  GemmEngine *gemm = nullptr;
  AttentionEngine *attention = nullptr;
  void *scratch = nullptr;
  int64_t scratchBytes = 0;
  int64_t step = 1; ///< 1-based optimizer step
  /// The device address of the rank's StepConstants table.
  const void *stepConstants = nullptr;
  /// The schedule's factor on every adamw's `lr` this step (Plan.h's
  /// LrSchedule); 1 without one.
  double lrScale = 1.0;
  /// The rank's flag that an update stored a NaN or an infinity
  /// (kernels/AdamW.h's nonFinite), where its kernels can write it.
  unsigned *nonFinite = nullptr;
};

using Launch = std::function<Status(const LaunchContext &)>;
using BindFn = Result<Launch> (*)(const OpCall &call, const OpEnv &env);

struct OpDef {
  BindFn bind = nullptr;
  /// kVariadic: any number, equal to the results'; kOneOrMore: at least
  /// one, with numResults results.
  int numOperands = 0;
  int numResults = 0;
  /// Bit k set: operand k is updated in place (adamw's param, m and v), so
  /// the hazard check counts it as written. Only the first 32 operands can
  /// be; a variadic op (sum_squares over a stage's gradients) has more.
  uint32_t updatedOperands = 0;
  bool updates(size_t operand) const {
    return operand < 32 && (updatedOperands >> operand & 1u);
  }
  /// The last this many of the numOperands may be left out (adamw's
  /// grad_norm_sq).
  int optionalOperands = 0;
  /// The last this many of the numResults may be left out: a workspace the
  /// launch works in (plan::OpSchema::workspaceResults), whose bytes hold
  /// no value, so the finite check passes over them.
  int workspaceResults = 0;
  /// Bit k set: operand (result) k may be a column view, whose rows are
  /// row_stride elements apart; the bind passes the stride to the kernel.
  /// Every other slot must be packed, which the runtime checks before bind.
  uint32_t stridedOperands = 0, stridedResults = 0;
  static constexpr int kVariadic = -1;
  static constexpr int kOneOrMore = -2;
};

/// Refuses a column view (a buffer with row_stride) in a slot the op does
/// not declare strided: its kernel would read the rows as packed.
Status checkPacked(const OpDef &def, const OpCall &call);

/// The one op table every backend binds from.
class OpTable {
public:
  static const OpTable &get();
  /// Null for an op no backend knows.
  const OpDef *find(const std::string &op) const;

private:
  OpTable();
  std::unordered_map<std::string, OpDef> table_;
};

/// Adds the collective ops (all_reduce, all_gather, reduce_scatter,
/// slice_to_rank, replicate) to a table; CollectiveOps.cpp.
void addCollectiveOps(std::unordered_map<std::string, OpDef> &table);
/// Adds vocab_max, target_logit, sum_exp, vocab_parallel_loss and its
/// grad; VocabParallelOps.cpp.
void addVocabParallelOps(std::unordered_map<std::string, OpDef> &table);
/// Adds valid_count and count_scale; LabelCountOps.cpp.
void addLabelCountOps(std::unordered_map<std::string, OpDef> &table);
/// Adds rope, rope_grad, attention and attention_grad; AttentionOps.cpp.
void addAttentionOps(std::unordered_map<std::string, OpDef> &table);
/// Adds ring_shift, attention_block, lse_merge and their grads;
/// RingAttentionOps.cpp.
void addRingAttentionOps(std::unordered_map<std::string, OpDef> &table);
/// Adds decode_attention; DecodeOps.cpp.
void addDecodeOps(std::unordered_map<std::string, OpDef> &table);
/// Adds adamw; OptimizerOps.cpp.
void addOptimizerOps(std::unordered_map<std::string, OpDef> &table);

/// Instructions [first, last] of a plan: consecutive adamw updates on one
/// stream with no event between them (only the first may wait, only the
/// last may signal), which one launch may do in their place.
struct AdamWRun {
  int64_t first = 0, last = 0;
};
std::vector<AdamWRun> findAdamWRuns(const plan::Plan &plan);
/// One device launch updating every call of a run (kernels::cuda::
/// AdamWGroup), each with its own scalars in env's step constants; an
/// error where the backend has no such kernel.
Result<Launch> bindAdamWGroup(const std::vector<const OpCall *> &calls,
                              const OpEnv &env);

/// A Launch calling the cpu or the cuda kernel with `args`; a null cuda
/// kernel (a build without CUDA) on a device is an error at bind.
template <typename Args>
Result<Launch> launchKernel(
    const OpEnv &env, const Args &args,
    std::type_identity_t<void (*)(const Args &)> cpuKernel,
    std::type_identity_t<Status (*)(const Args &, kernels::DeviceStream)>
        cudaKernel) {
  if (!env.onDevice)
    return Launch([args, cpuKernel](const LaunchContext &) {
      cpuKernel(args);
      return Status::ok();
    });
  if (!cudaKernel)
    return Status::invalidInput("this build has no CUDA kernel for the op");
  return Launch([args, cudaKernel](const LaunchContext &context) {
    return cudaKernel(args, context.stream);
  });
}

/// The attention library of the instruction's stream on a device backend;
/// null on the cpu or where the stream has none.
inline AttentionEngine *streamAttention(const OpCall &c, const OpEnv &env) {
  auto stream = static_cast<size_t>(c.instr->stream);
  return env.onDevice && stream < env.attentions.size() ? env.attentions[stream]
                                                        : nullptr;
}

/// `args` prepared on the stream's attention library at set-up: the bytes
/// its launches work in, or nothing where the library refuses the shape,
/// which is said on stderr (the caller then binds sharc's own kernel, so a
/// run never fails for want of the faster path).
template <typename Args>
std::optional<int64_t>
prepareOnLibrary(const OpCall &c, AttentionEngine &engine, const Args &args) {
  Result<int64_t> bytes = engine.prepare(args);
  if (bytes)
    return *bytes;
  std::fprintf(stderr, "sharc-run: %s at %s runs on sharc's kernel: %s\n",
               c.instr->op.c_str(), c.instr->loc.c_str(),
               bytes.status().message().c_str());
  return std::nullopt;
}

/// A launch of the stream's attention library on `need` bytes of the
/// stream's scratch, which it declares.
template <typename Args>
Launch libraryLaunchOnScratch(const OpCall &c, const OpEnv &env,
                              const Args &args, int64_t need) {
  env.needScratch(*c.instr, need);
  return Launch([args, need](const LaunchContext &context) {
    if (!context.attention)
      return Status::runtimeError("the stream has no attention engine");
    if (context.scratchBytes < need)
      return Status::runtimeError(
          "the stream has " + std::to_string(context.scratchBytes) +
          " bytes of scratch, the attention library needs " +
          std::to_string(need));
    return context.attention->run(args, context.scratch);
  });
}

/// launchKernel for a cuda kernel whose Args has a `scratch` pointer:
/// on a device, bind declares `scratchBytes(args)` for the instruction's
/// stream, and each launch runs on a copy of args pointing at the stream's
/// scratch. The cpu kernel needs none.
template <typename Args>
Result<Launch> launchKernelWithScratch(
    const OpEnv &env, const plan::Instruction &instr, const Args &args,
    std::type_identity_t<void (*)(const Args &)> cpuKernel,
    std::type_identity_t<Status (*)(const Args &, kernels::DeviceStream)>
        cudaKernel,
    std::type_identity_t<int64_t (*)(const Args &)> scratchBytes) {
  if (!env.onDevice || !cudaKernel)
    return launchKernel(env, args, cpuKernel, cudaKernel);
  int64_t bytes = scratchBytes(args);
  env.needScratch(instr, bytes);
  return Launch([args, cudaKernel, bytes](const LaunchContext &context) {
    if (context.scratchBytes < bytes)
      return Status::runtimeError(
          "the stream has " + std::to_string(context.scratchBytes) +
          " bytes of scratch, the kernel needs " + std::to_string(bytes));
    Args launchArgs = args;
    launchArgs.scratch = context.scratch;
    return cudaKernel(launchArgs, context.stream);
  });
}

namespace opcheck {
// Shared by the op files (OpChecks.cpp): each returns invalidInput naming
// the operand.
Status dtypeIs(const TensorRef &ref, DType dtype, const char *role);
Status isFloat(const TensorRef &ref, const char *role);
Status rankIs(const TensorRef &ref, size_t rank, const char *role);
Status numelIs(const TensorRef &ref, int64_t numel, const char *role);
Status sameShape(const TensorRef &ref, const TensorRef &like, const char *role);
/// An integer attribute that must be positive (group_size, head_dim).
Status positiveAttr(const char *name, int64_t value);
std::string shapeText(const std::vector<int64_t> &shape);
} // namespace opcheck

} // namespace sharc::exec

/// The cuda twin of a kernels::cpu function, or null without CUDA. Only
/// op files use it; SHARC_WITH_CUDA is set on sharc_executor alone.
/// SHARC_KERNELS_WITH_SCRATCH adds the cuda function `name##ScratchBytes`.
#if SHARC_WITH_CUDA
#define SHARC_KERNELS(name)                                                    \
  &::sharc::kernels::cpu::name, &::sharc::kernels::cuda::name
#define SHARC_KERNELS_WITH_SCRATCH(name)                                       \
  SHARC_KERNELS(name), &::sharc::kernels::cuda::name##ScratchBytes
#else
#define SHARC_KERNELS(name) &::sharc::kernels::cpu::name, nullptr
#define SHARC_KERNELS_WITH_SCRATCH(name) SHARC_KERNELS(name), nullptr
#endif
