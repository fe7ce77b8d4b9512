//===- AttentionRuns.h - a query block as prefix-masked calls ---*- C++ -*-===//
// defines: QueryRun, queryRuns, lastCall, RunStaging, runStaging,
//          cudnnAttentionGradRunBytes
//
// A fused attention library (cuDNN's SDPA) takes one mask a call: none, or
// causal along one diagonal. Of `rows` queries against `keys` keys, the
// causal diagonal aligned bottom-right lets query i see keys j <= i + keys
// - rows (top-left when rows == keys). A rank's block of queries against
// a block of keys, both at given global positions (kernels/Attention.h:
// one run of consecutive positions each, two under the balanced split),
// is a few such calls, because the keys a query sees are always a prefix
// of the block (positions increase with the row), and that prefix grows
// with the query's position either by one a row (the query's position
// inside a run of keys: causal) or not at all (between or past the key
// runs: every query sees the same prefix, no mask). queryRuns cuts the
// rows into such runs, each one call over its prefix of keys:
//  - context parallelism's K/V all-gather (all keys, one run): one causal
//    run on the contiguous split, two on the balanced one, joined where
//    adjacent (the last rank's chunks n-1 and n);
//  - ring attention's blocks: a block before the queries is one run with
//    no mask, the diagonal block one causal run; under the balanced split
//    a chunk of queries sees no key of the block, a prefix whole, or the
//    block causally, so at most two calls and rows that see nothing.
// Rows that see no key are a run of zero keys: their out is 0 and their
// lse kEmptyRowLse, their dq 0. The calls' dk and dv are summed; keys past
// the longest prefix get none.
//
// A backward with dlse is not expressible (the library computes delta
// from out and dout alone) and is refused; passes/MergedBlockGrads.cpp
// gives ring attention's blocks a backward without it.
//
// The backward stages every call's dk and dv but the last's (whose prefix
// is the longest and which writes them in place) and, where a call's rows
// are not all of them, the call's lse rows packed: cuDNN below 9.26 takes
// the backward's statistics only as a packed [B, H, S, 1] tensor.
// runStaging lays the staging out; cudnnAttentionGradRunBytes adds what
// cuDNN asks for the largest call, so the compiler predicts what the
// runtime allocates.
#pragma once

#include "kernels/Attention.h"
#include "planner/plan/Status.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace sharc::kernels {

/// `rows` queries from local row `row` that see the first `keys` keys of
/// the block: causally (bottom-right) when `causal`, else all of them.
/// keys == 0: the rows see no key.
struct QueryRun {
  int64_t row, rows, keys;
  bool causal;
  bool operator==(const QueryRun &) const = default;
};

/// The runs of `rows` queries at `queries` against `numKeys` keys at
/// `keyPositions` (positions relative to the first key), in row order.
inline std::vector<QueryRun> queryRuns(RowPositions queries, int64_t rows,
                                       RowPositions keyPositions,
                                       int64_t numKeys) {
  // The key runs as [row, end) with their first position.
  struct KeyRun {
    int64_t row, end, start;
  };
  std::vector<KeyRun> keyRuns;
  int64_t split = keyPositions.isOneRun()
                      ? numKeys
                      : std::min(keyPositions.secondRow, numKeys);
  if (split > 0)
    keyRuns.push_back({0, split, keyPositions.start});
  if (split < numKeys)
    keyRuns.push_back({split, numKeys, keyPositions.secondStart});
  // How many keys a query at `position` sees.
  auto seen = [&](int64_t position) {
    int64_t count = 0;
    for (const KeyRun &run : keyRuns)
      count +=
          std::clamp(position - run.start + 1, int64_t{0}, run.end - run.row);
    return count;
  };
  // Segments of rows on which seen() is linear: the query runs, cut where
  // a query's position reaches a key run's first or one-past-last
  // position. Each as its first count and slope (0 or 1; -1 for one row,
  // either).
  struct Segment {
    int64_t row, rows, first, slope;
  };
  std::vector<Segment> segments;
  int64_t second =
      queries.isOneRun() ? rows : std::min(queries.secondRow, rows);
  for (auto [begin, end] :
       {std::pair{int64_t{0}, second}, std::pair{second, rows}}) {
    if (begin >= end)
      continue;
    int64_t position = queries.at(begin);
    std::vector<int64_t> cuts{begin, end};
    for (const KeyRun &run : keyRuns)
      for (int64_t boundary : {run.start, run.start + run.end - run.row}) {
        int64_t row = begin + (boundary - position);
        if (row > begin && row < end)
          cuts.push_back(row);
      }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      int64_t row = cuts[i], length = cuts[i + 1] - row;
      int64_t at = queries.at(row), first = seen(at);
      segments.push_back(
          {row, length, first, length > 1 ? seen(at + 1) - first : -1});
    }
  }
  // Adjacent segments continuing one line join, unless the line would
  // start with a query that sees nothing under a causal mask.
  std::vector<Segment> joined;
  auto join = [](Segment &last, const Segment &s) {
    for (int64_t slope : {int64_t{0}, int64_t{1}}) {
      if ((last.slope == slope || last.slope == -1) &&
          (s.slope == slope || s.slope == -1) &&
          s.first == last.first + slope * last.rows &&
          !(slope == 1 && last.first == 0)) {
        last.rows += s.rows;
        last.slope = slope;
        return true;
      }
    }
    return false;
  };
  for (const Segment &s : segments)
    if (joined.empty() || !join(joined.back(), s))
      joined.push_back(s);
  std::vector<QueryRun> runs;
  for (const Segment &s : joined) {
    bool causal = s.slope == 1;
    runs.push_back(
        {s.row, s.rows, s.first + (causal ? s.rows - 1 : 0), causal});
  }
  return runs;
}

/// args' query runs; a backward with dlse is refused.
template <typename Args>
Result<std::vector<QueryRun>> queryRuns(const Args &args) {
  if constexpr (std::is_same_v<Args, AttentionGradArgs>)
    if (args.dlse)
      return Status::invalidInput("a prefix-masked backward takes no dlse");
  return queryRuns(args.queries(), args.seqLen, args.keyPositions(),
                   args.keys());
}

/// The index of the last call (the last run that sees a key), whose
/// prefix is the longest and which writes dk and dv in place; runs.size()
/// when no run sees a key.
inline size_t lastCall(const std::vector<QueryRun> &runs) {
  for (size_t i = runs.size(); i-- > 0;)
    if (runs[i].keys > 0)
      return i;
  return runs.size();
}

/// Where a backward's staging sits in its workspace (byte offsets; the
/// staged dk at 0, then dv, then the packed lse rows, each 256-byte
/// aligned); the library's own workspace from `library` on.
struct RunStaging {
  int64_t dv = 0, stats = 0, library = 0;
};

/// The staging of a backward over `runs` (numHeads query heads, numKvHeads
/// key heads of headDim, bf16 dk and dv, fp32 lse) of `seqLen` rows.
inline RunStaging runStaging(const std::vector<QueryRun> &runs, int64_t seqLen,
                             int64_t batch, int64_t numHeads,
                             int64_t numKvHeads, int64_t headDim) {
  auto align = [](int64_t bytes) { return (bytes + 255) / 256 * 256; };
  int64_t stagedKeys = 0, packedRows = 0;
  size_t last = lastCall(runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].keys == 0)
      continue;
    if (runs[i].rows != seqLen)
      packedRows = std::max(packedRows, runs[i].rows);
    if (i != last)
      stagedKeys = std::max(stagedKeys, runs[i].keys);
  }
  RunStaging staging;
  staging.dv = align(stagedKeys * batch * numKvHeads * headDim * 2);
  staging.stats = 2 * staging.dv;
  staging.library = staging.stats + align(batch * numHeads * packedRows * 4);
  return staging;
}

/// The workspace a bf16 backward over `runs` takes on cuDNN: the staging,
/// then what cuDNN 9.19 asks for the largest call (an fp32 dq accumulator
/// of the call's rows; under GQA an fp32 dk/dv accumulator per query head
/// over the call's keys; its rows' fp32 statistic; 256 bytes; measured on
/// an H100 and an H200 for every shape KernelsCudnnAttentionTest and
/// sharc-attention-bench build).
inline int64_t cudnnAttentionGradRunBytes(const std::vector<QueryRun> &runs,
                                          int64_t seqLen, int64_t batch,
                                          int64_t numHeads, int64_t numKvHeads,
                                          int64_t headDim) {
  int64_t library = 0, qWidth = numHeads * headDim;
  for (const QueryRun &run : runs) {
    if (run.keys == 0)
      continue;
    int64_t gqa = numKvHeads < numHeads ? run.keys * batch * qWidth : 0;
    library = std::max(library, run.rows * batch * qWidth * 4 + gqa * 4 +
                                    batch * numHeads * run.rows * 4 + 256);
  }
  return runStaging(runs, seqLen, batch, numHeads, numKvHeads, headDim)
             .library +
         library;
}

} // namespace sharc::kernels
