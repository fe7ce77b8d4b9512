//===- Plan.h - the compiler/runtime contract -------------------*- C++ -*-===//
// defines: Plan, Buffer, Instruction, AttrValue, ParamEntry, IoEntry,
//          Sharding, MeshAxis, Region, LrSchedule, kPlanVersion
//
// A plan is one SPMD program for every rank of a device mesh: buffers with
// local (per-rank) shapes placed at fixed offsets in a few regions, and an
// instruction list in schedule order, each instruction on a stream with the
// events it waits for and signals. Rank-dependent quantities (shard offsets,
// token ranges) are not baked in: kernels derive them from the rank's mesh
// coordinates at run time, named by an instruction's attributes.
//
// The plan holds no MLIR: it is written by planner/PlanEmitter and read by
// the executor through PlanIO.h. docs/plan-format.md documents the file.
#pragma once

#include "planner/plan/DType.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace sharc::plan {

inline constexpr int64_t kPlanVersion = 1;

/// The mesh axis of pipeline stages: an instruction with a stage runs only
/// on the ranks whose coordinate on it is that stage.
inline constexpr const char *kStageAxis = "pp";

/// Where a buffer lives. Every region is allocated once at set-up.
enum class Region : uint8_t {
  Param,      ///< model parameters, persistent across steps
  OptState,   ///< optimizer moments, persistent across steps
  Input,      ///< per-step inputs written by the runtime (tokens, labels)
  Output,     ///< results read by the runtime after a step (loss, grads)
  Activation, ///< the arena: every temporary of a step, offsets reused
  Gradient,   ///< parameter gradients of a step, offsets reused like the
              ///< activations' (each dies once its update has run)
  Cache,      ///< generation's key/value cache (a --decode plan),
              ///< persistent across steps, written in place
};

const char *regionName(Region region);

struct MeshAxis {
  std::string name; ///< "dp" or "tp"; the last axis varies fastest
  int64_t size = 1;
};

/// How a global tensor is split over the mesh: for each mesh axis, the
/// tensor dimension it is sharded on, or -1 when replicated on that axis.
/// Shards are contiguous and in rank order along the axis, except along
/// balancedAxis (context parallelism's balanced split of the sequence,
/// kernels/SequencePositions.h): the extent there is cut into 2n chunks
/// and coordinate r holds chunk r, then chunk 2n-1-r.
struct Sharding {
  std::map<std::string, int64_t> dimOfAxis;
  std::string balancedAxis = ""; ///< empty: every split is contiguous
  /// Axes that split one dimension together nest in mesh order, the
  /// earlier axis outer, unless listed here: then in this order, outer
  /// first. ZeRO's dp block of a tensor-parallel shard's rows is inside
  /// the tp split: {tp: 0, dp: 0, order: [tp, dp]}.
  std::vector<std::string> order = {};
  /// With pipeline stages: only the ranks of this stage (their coordinate
  /// on kStageAxis) hold the tensor; -1: every stage does.
  int64_t stage = -1;
  bool isReplicated() const;
};

struct Buffer {
  int64_t id = 0;
  std::string name; ///< the IR value it came from, for messages and traces
  Region region = Region::Activation;
  int64_t offset = 0; ///< bytes from the start of its region
  int64_t numBytes = 0;
  DType dtype = DType::F32;
  std::vector<int64_t> shape; ///< local (per-rank) shape
  /// The earlier buffer whose bytes these are, or -1: a gradient is a view
  /// into its bucket's slab, so that one collective reduces the whole
  /// bucket in place (docs/plan-format.md, "Views").
  int64_t viewOf = -1;
  /// A column view's elements from one row (the last dimension) to the
  /// next, or 0 where the rows are packed: a view of columns [c, c + w) of
  /// a [.., W] base has offset base + c elements, row_stride W, and bytes
  /// from its first element to its last (docs/plan-format.md, "Views").
  int64_t rowStride = 0;
  bool isStrided() const { return rowStride > 0; }
  /// Bytes from the first element to one past the last (the shape's bytes
  /// when packed); nullopt on overflow or a negative dimension.
  std::optional<int64_t> extentBytes() const;
  /// Elements between rows: row_stride, or the last dimension.
  int64_t rowPitch() const {
    return rowStride > 0 ? rowStride : (shape.empty() ? 1 : shape.back());
  }
};

using AttrValue =
    std::variant<int64_t, double, std::string, std::vector<int64_t>>;

struct Instruction {
  std::string op; ///< the sharc op name without the dialect, e.g. "matmul"
  std::vector<int64_t> operands; ///< buffer ids read
  std::vector<int64_t> results;  ///< buffer ids written
  std::map<std::string, AttrValue> attrs;
  int64_t stream = 0;
  std::vector<int64_t> waits;   ///< events to wait for before starting
  std::vector<int64_t> signals; ///< events recorded when it finishes
  std::string loc; ///< "file:line:col" of the model input that made it
  /// The pipeline stage that runs it (kStageAxis coordinate); -1: every
  /// rank runs it.
  int64_t stage = -1;
  /// What sharc-recompute runs again in the backward, by policy: "full",
  /// "selective" or "sp-allgather"; empty for the rest. Runs as any other
  /// instruction; traces and reports tell it apart.
  std::string recompute;

  int64_t getInt(const std::string &key, int64_t fallback = 0) const;
  double getFloat(const std::string &key, double fallback = 0.0) const;
  std::string getString(const std::string &key,
                        const std::string &fallback = "") const;
  std::vector<int64_t> getInts(const std::string &key) const;
};

/// How a parameter's initial values are drawn. Values are a function of
/// (seed, parameter name, global element index) so that every rank can
/// initialise its own shard and the shards together equal the dense tensor.
struct InitSpec {
  std::string kind = "normal"; ///< "normal", "ones" or "zeros"
  double stddev = 0.02;
};

struct ParamEntry {
  std::string name; ///< e.g. "layers.0.attn.q_proj.weight"
  int64_t buffer = -1;
  std::vector<int64_t> globalShape;
  Sharding sharding;
  InitSpec init;
  std::string tiedTo;         ///< another parameter's name if tied
  std::vector<int64_t> state; ///< optimizer-state buffers (adam m, v)
  /// How the state is split where it differs from `sharding` (ZeRO-1: the
  /// moments of one block per dp rank, docs/memory.md); nullopt: as the
  /// parameter.
  std::optional<Sharding> stateSharding;
  const Sharding &stateLayout() const {
    return stateSharding ? *stateSharding : sharding;
  }
};

/// A tensor crossing the step boundary: tokens and labels in, loss, logits
/// and gradients out.
struct IoEntry {
  std::string name; ///< "tokens", "labels", "loss", "logits", "grad:<param>"
  int64_t buffer = -1;
  std::vector<int64_t> globalShape;
  Sharding sharding;
};

/// The learning rate of optimizer step t (1-based) is every adamw's `lr`
/// attribute times factor(t): linear warmup from lr/warmupSteps to lr over
/// the first warmupSteps steps, then a decay to minFactor * lr at
/// totalSteps (cosine: minFactor + (1 - minFactor) (1 + cos(pi p)) / 2,
/// linear: 1 - (1 - minFactor) p, p the share of the decay done), then flat.
/// It is a function of t alone, so a resumed run continues it exactly.
struct LrSchedule {
  std::string decay = "constant"; ///< "constant", "linear" or "cosine"
  int64_t warmupSteps = 0;
  int64_t totalSteps = 0; ///< where the decay ends; > warmupSteps
  double minFactor = 1.0; ///< the floor as a fraction of lr, in [0, 1]

  /// No warmup and no decay: the factor is 1 at every step.
  bool isConstant() const { return decay == "constant" && warmupSteps == 0; }
  double factor(int64_t step) const;
};

struct Plan {
  int64_t version = kPlanVersion;
  std::string modelName;
  std::string mode; ///< the pipeline that made it, e.g. "dense", "tp_sp"
  std::vector<MeshAxis> mesh;
  int64_t seqLen = 0;
  int64_t batchSize = 0; ///< global samples per step
  int64_t vocabSize = 0;
  DType computeDType = DType::F32;
  int64_t numStreams = 1;
  int64_t numEvents = 0;
  std::map<Region, int64_t> regionBytes;
  std::vector<Buffer> buffers; ///< indexed by id
  std::vector<ParamEntry> params;
  std::vector<IoEntry> inputs;
  std::vector<IoEntry> outputs;
  std::vector<Instruction> instructions;
  LrSchedule lrSchedule;

  int64_t worldSize() const;
  int64_t axisSize(const std::string &axis) const;
  const IoEntry *findInput(const std::string &name) const;
  const IoEntry *findOutput(const std::string &name) const;
  const ParamEntry *findParam(const std::string &name) const;
};

} // namespace sharc::plan
