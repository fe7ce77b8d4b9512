//===- CudnnAttention.h - causal GQA attention on cuDNN's SDPA --*- C++ -*-===//
// defines: CudnnAttention (cuda::)
//
// kernels/Attention.h's forward and backward as cuDNN's fused flash
// attention, built through the cuDNN frontend's graph API. The layouts are
// described to cuDNN by strides, so sequence-first [S, B, heads*D]
// activations and the [B, H, S] fp32 log-sum-exp are used in place: cuDNN's
// "Stats" output is exactly that log-sum-exp (natural log, scaled scores),
// which keeps the IR's contract that only the lse survives the forward.
// cuDNN runs bf16 only here; f32 plans keep kernels/cuda/Attention.cu.
//
// A block of queries against a block of keys at other positions (context
// parallelism's K/V all-gather, ring attention's blocks) is a few SDPA
// calls, one per run of queries over the prefix of keys they see, causal
// (diagonal aligned bottom-right) or unmasked (kernels/AttentionRuns.h);
// rows that see no key get out 0 and lse kEmptyRowLse. The backward writes
// the last call's dk and dv in place and zeroes the keys past its prefix
// (no query of the rank sees them); the other calls' go to staging at the
// workspace's start and are added in (kernels/cuda/AttentionRows.h); a
// call's lse rows are copied out packed where they are not all of them, as
// cuDNN's backward below 9.26 requires. A backward with dlse (a ring block
// that reads its own partial, not the merged output) stays on sharc's
// kernel.
//
// A CudnnAttention belongs to one stream (its handle is bound to it). The
// graph of each shape is built once, at set-up, by prepare(), which also
// says how much workspace its launches need; a launch looks the graph up and
// runs it on the caller's workspace.
//
//   auto engine = CudnnAttention::create(stream);
//   auto bytes = (*engine)->prepare(args);         // at set-up
//   SHARC_TRY((*engine)->run(args, workspace));     // every step
#pragma once

#include "kernels/Attention.h"
#include "kernels/AttentionRuns.h"
#include "kernels/DecodeAttention.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

namespace sharc::kernels::cuda {

class CudnnAttention {
public:
  /// A cuDNN handle on the current device, bound to `stream`.
  /// `deterministic` picks the backward that accumulates dq in a fixed
  /// order (bit-reproducible, somewhat slower).
  static Result<std::unique_ptr<CudnnAttention>>
  create(DeviceStream stream, bool deterministic = false);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention &) = delete;
  CudnnAttention &operator=(const CudnnAttention &) = delete;

  /// Whether cuDNN is asked at all: bf16 storage and a head dim cuDNN's
  /// flash kernels take (a multiple of 8, at most 128 for the backward).
  static bool accepts(DType dtype, int64_t headDim);
  /// Builds the shape's graph; its workspace bytes, or an error naming what
  /// cuDNN refused (the caller may then fall back to its own kernel).
  Result<int64_t> prepare(const AttentionArgs &args);
  Result<int64_t> prepare(const AttentionGradArgs &args);
  /// Runs a prepared shape; `workspace` holds prepare()'s bytes.
  Status run(const AttentionArgs &args, void *workspace);
  Status run(const AttentionGradArgs &args, void *workspace);

  /// decode_attention's prefill path (kernels/DecodeAttention.h): a bf16
  /// step of several rows through cuDNN's SDPA over the caches, padding
  /// mask and bottom-right causal diagonal. prepare() builds the graph and
  /// returns the scratch a launch needs (the staging, then cuDNN's
  /// workspace); run() enqueues the cache write, the SDPA and the padding
  /// rows' copies on the handle's stream.
  static bool accepts(const DecodeAttentionArgs &args);
  Result<int64_t> prepare(const DecodeAttentionArgs &args);
  Status run(const DecodeAttentionArgs &args, void *scratch);

  struct Graph; ///< one built cuDNN graph

private:
  CudnnAttention() = default;
  /// backward, causal, the run's rows and keys, the lse's row pitch,
  /// batch, numHeads, numKvHeads, headDim, and the row pitches of v and dv
  /// (0: packed).
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int64_t, int64_t, int64_t>;
  /// The graph of one run of args' queries (dv written at `dvPitch`, the
  /// lse's rows `lseRows` apart), built on first use.
  template <typename Args>
  Result<Graph *> graphFor(const Args &args, const QueryRun &run,
                           int64_t dvPitch, int64_t lseRows);
  Result<Graph *> prefillGraphFor(const DecodeAttentionArgs &args);
  /// Builds the graphs of args' query runs; the workspace a launch needs.
  template <typename Args> Result<int64_t> prepareRuns(const Args &args);
  /// Validates, plans and builds `built`'s graph and sizes its workspace.
  Status buildGraph(Graph &built);
  Status execute(Graph &graph, std::unordered_map<int64_t, void *> &pack,
                 void *workspace, const char *direction);

  void *handle_ = nullptr; ///< cudnnHandle_t
  bool deterministic_ = false;
  std::map<Key, std::unique_ptr<Graph>> graphs_;
  /// rows, batch, numHeads, numKvHeads, headDim, cacheLen
  using PrefillKey =
      std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;
  std::map<PrefillKey, std::unique_ptr<Graph>> prefillGraphs_;
  DeviceStream stream_ = nullptr; ///< the handle's, for the prefill's kernels
};

} // namespace sharc::kernels::cuda
