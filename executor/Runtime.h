//===- Runtime.h - runs a plan: arenas, threads, steps ----------*- C++ -*-===//
// defines: RunOptions, StepStats, Runtime
//
// Set-up validates the plan against the backend (every op known, every
// buffer inside its region, every operand shape what its op expects, every
// wait satisfiable: StreamOrder.h) and allocates each rank's regions once.
//
// Instructions are bound once per rank (OpTable.h) to the backend's memory
// (Backend.h). On the cpu backend a step runs one std::thread per stream of
// every rank (inline when there is only one of them); on a device backend
// one thread per rank enqueues all of its instructions in plan order. A
// stream runs the instructions carrying its id in list order; before one
// starts, the stream waits until every event in `waits` has been signalled
// in this step, and after it finishes it signals every event in `signals`.
// Events reset every step, and a step ends when every stream of every rank has
// finished, so steps never overlap. An event wait times out after
// RunOptions::collectiveTimeoutSeconds into "rank R, instr I (op): waited N s
// for event E". Collectives meet in an in-process CommWorld per stream (on
// the cpu over processes, a ProcessChannel per stream), so collectives of
// two streams of a rank never share a rendezvous. With
// checkHazards, set-up also rejects a plan in which two instructions on
// different streams touch overlapping bytes (one writing) without an event
// ordering them, and each step fills an activation buffer with NaN right after
// its last use. With recordTrace, each stream thread appends (instr, start,
// end) to its own vector, without locks (on a device backend, CUDA events
// around each instruction time it instead); lastStepTrace() formats the
// last successful step (Trace.h).
//
//   auto runtime = Runtime::create(plan, RunOptions{});
//   SHARC_TRY((*runtime)->initParams(/*seed=*/42));
//   SHARC_TRY((*runtime)->setBatch(tokens)); // [B, S] row-major
//   auto stats = (*runtime)->step();         // stats->loss, stats->seconds
#pragma once

#include "executor/Backend.h"
#include "executor/OpTable.h"
#include "executor/Processes.h"
#include "executor/StreamOrder.h"
#include "executor/Trace.h"
#include "planner/plan/Plan.h"
#include "planner/plan/SafeTensors.h"
#include "planner/plan/Status.h"

#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sharc::exec {

struct RunOptions {
  /// "cpu", "cuda" or "auto" (Backend.h).
  std::string backend = "cpu";
  /// Fill the activation region with NaN before every step, so a read of a
  /// temporary nobody wrote shows up in the loss.
  bool poisonActivations = false;
  /// Also the deadline of every event wait.
  double collectiveTimeoutSeconds = 60.0;
  /// Checking mode: reject a plan with an ordering hazard between streams
  /// at create (a runtimeError naming both instructions), poison every
  /// activation buffer right after its last use, and stop at the first
  /// instruction whose output holds a NaN or infinity, naming it (on a
  /// device each instruction then waits for its stream).
  bool checkHazards = false;
  /// Time every instruction of every step; off, a stream pays one branch
  /// per instruction.
  bool recordTrace = false;
  /// On a device that can (CUDA): capture the second step's enqueued work
  /// as a graph and replay it for every later step, and each evaluation
  /// pass (validation's loss, generation's logits) likewise from its
  /// second run. The first runs are eager (NCCL and the libraries set up
  /// on their first calls), and so are steps that trace or poison.
  bool captureSteps = false;
  /// The processes the run spans (Processes.h); null: this one drives
  /// every rank. Each process then holds only its span of ranks, and
  /// gathers, the loss and the step time are agreed over all of them, so
  /// every process must call the same methods in the same order.
  std::shared_ptr<Processes> processes = nullptr;
  /// cuda: run more ranks than GPUs (BackendOptions::shareGpus).
  bool shareGpus = false;
};

struct StepStats {
  double loss = 0.0;    ///< rank 0's `loss` output
  double seconds = 0.0; ///< wall time of the step (the most of any process)
  /// The global gradient norm before clipping (the square root of the
  /// `grad_norm_sq` output); NaN in a plan that does not clip.
  double gradNorm = std::numeric_limits<double>::quiet_NaN();
  /// Whether an optimizer update of this step, on any rank of any process,
  /// stored a NaN or an infinity (Divergence.h names which tensor).
  bool nonFiniteUpdate = false;
};

class Runtime {
public:
  static Result<std::unique_ptr<Runtime>> create(const plan::Plan &plan,
                                                 const RunOptions &options);
  ~Runtime();

  const plan::Plan &plan() const { return plan_; }
  /// The backend the plan runs on ("cpu" or "cuda").
  const char *backendName() const { return backend_->name(); }
  int64_t worldSize() const { return plan_.worldSize(); }
  /// The ranks this process drives (all of them without mpirun).
  const RankSpan &localRanks() const { return span_; }
  /// Whether this process writes the run's output files (Processes.h).
  bool writesFiles() const { return processes_->writesFiles(); }
  /// The optimizer step the next step() runs (1-based).
  int64_t nextStep() const { return nextStep_; }
  void setNextStep(int64_t step) { nextStep_ = step; }

  /// Draws every parameter from (seed, name, global index) on every rank,
  /// zeroes optimizer state and restarts the step counter at 1.
  Status initParams(uint64_t seed);
  /// Hands out a global tensor by name, valid until the next call; nullptr
  /// when there is none. A TensorFile's, or one read from disk at a time
  /// (Checkpoint.cpp), so a large model loads without all of it in host
  /// memory.
  using TensorSource =
      std::function<Result<const plan::NamedTensor *>(const std::string &name)>;
  /// Global tensors by parameter name; each rank takes its slice, converting
  /// f32/bf16 as needed. A missing or mis-shaped tensor is invalid input.
  /// Tied parameters (ParamEntry::tiedTo) are neither needed nor read.
  Status loadParams(const TensorSource &source);
  Status loadParams(const plan::TensorFile &file);

  /// A tensor a checkpoint holds: its name, storage dtype and global
  /// shape, and the buffer and layout of its shards.
  struct SavedTensor {
    plan::TensorSpec spec;
    int64_t buffer;
    plan::Sharding sharding;
    bool isState; ///< an optimizer moment, not a parameter
  };
  /// Every untied parameter in its storage type; under bf16-mixed its f32
  /// master (of which the bf16 parameter is a rounding). In plan order.
  std::vector<SavedTensor> paramTensors() const;
  /// The optimizer state buffers as tensors named "<param>.exp_avg" and
  /// "<param>.exp_avg_sq" (stateTensorName); the master is a parameter's.
  std::vector<SavedTensor> optimizerStateTensors() const;
  /// One of them, gathered from every rank that holds a shard (under
  /// mpirun every process calls it: the shards travel between them).
  /// `reuse`, the bytes of a tensor gathered before, keeps its storage (its
  /// pages are touched: a save cycles two, a snapshot keeps its own).
  Result<plan::NamedTensor> gatherSaved(const SavedTensor &tensor,
                                        ByteVector reuse = {}) const;
  /// paramTensors(), each gathered.
  Result<plan::TensorFile> gatherParams() const;
  /// optimizerStateTensors(), each gathered.
  Result<plan::TensorFile> gatherOptimizerState() const;
  Status loadOptimizerState(const TensorSource &source);
  Status loadOptimizerState(const plan::TensorFile &file);
  static std::string stateTensorName(const std::string &param, size_t index);

  /// tokens: the global batch, batch-first [B, S] row-major, B*S ids in
  /// [0, vocab). Writes each rank's `tokens` input ([S, B], sequence first)
  /// and the shifted `labels` (labels[s,b] = tokens[s+1,b], last row -100),
  /// each rank its slice by the input's sharding.
  Status setBatch(const std::vector<int32_t> &tokens);
  /// As above with explicit labels, batch-first [B, S] like the tokens:
  /// each in [0, vocab) or -100 (ignored by the loss, anywhere).
  Status setBatch(const std::vector<int32_t> &tokens,
                  const std::vector<int32_t> &labels);
  /// A decode plan's step (sharc compile --decode): each sample's new
  /// token, in [0, vocab), and its position, in [0, seq_len) (the cache's
  /// length), B of each.
  Status setDecodeStep(const std::vector<int32_t> &tokens,
                       const std::vector<int32_t> &positions);
  /// A decode plan's prefill (sharc compile --decode --prefill-rows T),
  /// which evalPass("prefill") then runs: T x B tokens and positions,
  /// row-major [T, B], checked as setDecodeStep's; a sample may repeat a
  /// position only with its token (a padded chunk repeats its last row).
  Status setPrefillStep(const std::vector<int32_t> &tokens,
                        const std::vector<int32_t> &positions);
  /// Runs every rank's instruction list once; the step counter advances
  /// only on success.
  Result<StepStats> step();
  /// The loss of the batch setBatch wrote, computed by the instructions the
  /// loss depends on (ForwardPrefix.h), in plan order: parameters, optimizer
  /// state, the step counter and the schedule are untouched, so training
  /// after it is bit for bit what it would have been. Invalid input for a
  /// plan whose prefix would write a parameter.
  Result<double> evalLoss();
  /// As evalLoss for any output: runs the instructions output `name`
  /// depends on and returns its global tensor (as gatherOutput), or with
  /// numRows >= 0 its rows [firstRow, firstRow + numRows) along dim 0
  /// (gatherOutputRows). The logits of a plan compiled with --emit-logits
  /// are how generation (Generation.h) reads the next-token scores.
  Result<plan::NamedTensor> evalOutput(const std::string &name,
                                       int64_t firstRow = 0,
                                       int64_t numRows = -1);
  /// evalOutput without reading the output back: the pass alone, for
  /// what it writes in place (a decode step's key/value caches).
  Status evalPass(const std::string &name) { return runOutputPrefix(name); }
  /// The global tensor of an output (or input) of the last step, gathered
  /// over shards; float outputs come back as f32, i32 as i32.
  Result<plan::NamedTensor> gatherOutput(const std::string &name) const;
  /// gatherOutput's rows [firstRow, firstRow + numRows) along dim 0 (a
  /// position of [S, B, V] logits), reading only the bytes that hold them:
  /// generation takes one position of the logits per token.
  Result<plan::NamedTensor> gatherOutputRows(const std::string &name,
                                             int64_t firstRow,
                                             int64_t numRows) const;
  /// Every output of the last step, as gatherOutput returns them.
  Result<plan::TensorFile> gatherOutputs() const;
  /// The last successful step's instruction timings as a Chrome trace
  /// (Trace.h). Fails (runtimeError) when recordTrace is off or no step has
  /// succeeded yet.
  Result<std::string> lastStepTrace() const;
  /// Per rank, the device memory the process holds there (allocations,
  /// CUDA context, library buffers); -1 on the cpu backend.
  std::vector<int64_t> deviceBytesInUse() const;
  /// Per rank, the working memory the device allocated beside the plan's
  /// regions (library workspaces, kernel scratch, staging); 0 on the cpu.
  std::vector<int64_t> workspaceBytes() const;
  /// Its records; empty when there is none.
  const StepTrace &lastStepRecords() const { return lastTrace_; }

private:
  /// One instruction bound to one rank's storage.
  struct BoundInstr {
    const OpDef *def = nullptr;
    OpCall call;
    Launch launch;
    /// A grouped transfer's own launch, which groupTransfers moved into its
    /// group's; empty otherwise.
    Launch alone;
  };
  /// Launches that replace instructions' bound ones, by instruction index:
  /// an evaluation that takes part of a transfer group (the forward's send
  /// beside the backward's recv, 1F1B) runs only that part, grouped.
  using LaunchOverrides = std::map<int64_t, Launch>;
  struct RankState {
    int64_t rank = 0;
    int64_t stage = -1; ///< its pipeline stage; -1 without one
    std::unique_ptr<RankDevice> device;
    OpEnv env;
    std::vector<BoundInstr> program;
    /// The runs of transfers that groupTransfers made one launch each.
    std::vector<std::vector<int64_t>> transferGroups;
    /// Device launches' per-step values, and their host table.
    StepConstants stepConstants;
    std::vector<char> stepTable;
  };
  /// Whether `rank` holds a tensor of `sharding`: every rank does, but a
  /// pipeline stage's tensor (Sharding::stage) is on that stage's ranks
  /// only, whose bytes other stages use for their own.
  static bool holdsStage(const RankState &rank,
                         const plan::Sharding &sharding) {
    return sharding.stage < 0 || sharding.stage == rank.stage;
  }
  /// Checking mode: an error naming the step and the buffer when the
  /// instruction's outputs (and in-place updates) hold a NaN or infinity.
  Status checkFinite(RankState &rank, const BoundInstr &bound);
  /// Each run of a rank's adjacent sends and recvs on one stream (the
  /// later ones without waits, the earlier without signals) becomes one
  /// launch at its first instruction, posted as one group (1F1B's
  /// send-forward + recv-backward pairs, which NCCL would otherwise
  /// deadlock on).
  Status groupTransfers(RankState &rank);
  /// On a device: each run of consecutive adamw updates (findAdamWRuns)
  /// becomes one grouped launch at its first instruction.
  Status groupAdamW(RankState &rank);
  /// Enqueues one pass of a rank: uploads its step constants, then replays
  /// the graph captured in `graphSlot`, captures one there, or (slot -1)
  /// enqueues eagerly.
  Status enqueueStep(RankState &rank, const std::vector<int64_t> &order,
                     int64_t graphSlot, const LaunchOverrides *overrides,
                     bool serial);

  Runtime(const plan::Plan &plan, const RunOptions &options);
  Status setUp();
  /// Binds every instruction (bindInstrs), then has the device allocate
  /// the scratch the launches declared.
  Status bindRank(RankState &rank);
  Status bindInstrs(RankState &rank);
  /// Runs (or enqueues) instructions `indices` of one rank; `trace` gets a
  /// record per instruction when set. `serial`: each instruction after the
  /// one before it whatever their streams (RankDevice::order).
  Status runInstrs(RankState &rank, const std::vector<int64_t> &indices,
                   std::vector<TraceRecord> *trace,
                   const LaunchOverrides *overrides = nullptr,
                   bool serial = false);
  /// Runs one pass: a task per (rank, stream) with work in streamInstrs on
  /// the cpu, or per rank over `order` where the backend enqueues or the
  /// pass is `serial` (in plan order across streams, as evaluation runs);
  /// `record` times every instruction into recording_. With captureSteps
  /// on a device that can, the pass is replayed from (or captured into) the
  /// graph of `graphSlot` (RankDevice::hasCaptured); -1: always eager.
  Status runProgram(const std::vector<std::vector<int64_t>> &streamInstrs,
                    const std::vector<int64_t> &order, bool record,
                    const std::vector<LaunchOverrides> *overrides = nullptr,
                    bool serial = false, int64_t graphSlot = -1);
  Result<double> readLoss() const;
  /// Rank 0's value of the one-element output `entry`, on every process.
  Result<double> readScalar(const plan::IoEntry &entry) const;
  /// Wakes every collective and event wait after a failure.
  void abortAll();
  void *storage(int64_t rank, int64_t bufferId) const;
  /// The state of a rank this process drives.
  RankState &local(int64_t rank) const { return *ranks_[rank - span_.first]; }
  Status zeroBuffer(int64_t rank, int64_t bufferId);
  /// bf16-mixed: writes `param`'s weights on `rank` as its f32 master
  /// rounded, on the device, where the two slices hold the same elements
  /// (not under ZeRO-1, whose master is a block); whether it did.
  Result<bool> weightsFromMaster(const RankState &rank,
                                 const plan::ParamEntry &param) const;
  /// Rows [first, first + count) along dim 0; count < 0: all of them.
  struct Rows {
    int64_t first, count;
  };
  /// Gathers a global tensor whose shards live in buffer `bufferId`, or
  /// the given rows of it (in range: the caller checks), into `reuse`'s
  /// storage.
  Result<plan::NamedTensor>
  gatherTensor(const std::string &name, int64_t bufferId,
               const std::vector<int64_t> &globalShape,
               const plan::Sharding &sharding, DType dtype, Rows rows = {0, -1},
               ByteVector reuse = {}) const;
  /// Writes every rank's slice of a global tensor into buffer `bufferId`.
  Status scatterTensor(const plan::NamedTensor &tensor, int64_t bufferId,
                       const plan::Sharding &sharding);

  plan::Plan plan_;
  RunOptions options_;
  std::unique_ptr<Backend> backend_;
  StreamOrder order_;
  /// Every instruction index in plan order: a device rank's one stream of
  /// host work.
  std::vector<int64_t> planOrder_;
  /// Checking mode: buffers that other buffers are views of.
  std::vector<bool> hasViews_;
  /// Checking mode: per instruction, the activation buffers to poison
  /// after it; empty otherwise.
  std::vector<std::vector<int64_t>> poisonAfter_;
  std::shared_ptr<Processes> processes_;
  RankSpan span_;
  /// The ranks of span_, in order.
  std::vector<std::unique_ptr<RankState>> ranks_;
  int64_t nextStep_ = 1;
  /// The schedule's factor on adamw's lr for the step being run.
  double lrScale_ = 1.0;
  /// The instructions an output depends on, in plan order.
  struct EvalProgram {
    std::vector<int64_t> order;
    /// Its CUDA graph's slot (the step's is 0), and how often it has run:
    /// the first run is eager, as the step's is.
    int64_t graphSlot = 0;
    int64_t runs = 0;
    /// Per rank of span_, the groups of transfers it takes only part of.
    std::vector<LaunchOverrides> launches;
  };
  /// `rank`'s launches for the taken members of each transfer group that
  /// `taken` splits: the taken ones grouped at the first of them.
  LaunchOverrides partialGroups(const RankState &rank,
                                const std::vector<bool> &taken) const;
  /// Runs output `name`'s prefix (outputInstructions), made at its first
  /// evaluation and kept in evalPrograms_.
  Status runOutputPrefix(const std::string &name);
  /// setDecodeStep's and setPrefillStep's checks and uploads, into inputs
  /// `tokensName` and `positionsName`.
  Status setPositionedTokens(const char *tokensName, const char *positionsName,
                             const std::vector<int32_t> &tokens,
                             const std::vector<int32_t> &positions);
  std::map<std::string, EvalProgram> evalPrograms_;
  /// recordTrace: the step being run, [rank][stream], each vector written
  /// only by its own thread; swapped into lastTrace_ when the step succeeds.
  StepTrace recording_;
  StepTrace lastTrace_;
  std::chrono::steady_clock::time_point stepStart_;
};

} // namespace sharc::exec
