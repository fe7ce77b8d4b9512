//===- AttentionRuns.h - a query block as prefix-causal calls ---*- C++ -*-===//
// defines: QueryRun, queryRuns
//
// A fused attention library (cuDNN's SDPA) masks along one causal diagonal:
// of rows queries against keys keys, query i sees keys j <= i + keys - rows
// (the diagonal aligned bottom-right; top-left when rows == keys). A
// rank's block of queries against the whole sequence's keys (context
// parallelism's K/V all-gather, kernels/Attention.h) is that, one call per
// run of consecutive query positions over the prefix of keys the run's
// last query sees: one run on the contiguous split, two on the balanced
// one (kernels/SequencePositions.h), one again where the two are adjacent
// (the last rank's chunks n-1 and n). The calls' dk and dv are summed, and
// the keys past the longest prefix get none.
//
// Not expressible that way, and refused with the reason: keys in two runs
// or a query before the first key (ring attention's blocks), and a
// backward with dlse (ring attention's blocks again: the library computes
// delta from out and dout alone).
#pragma once

#include "kernels/Attention.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace sharc::kernels {

/// `rows` queries from local row `row`, at consecutive positions, the last
/// of which sees the first `keys` keys.
struct QueryRun {
  int64_t row, rows, keys;
};

/// args' query runs in row order (the last sees the longest prefix).
template <typename Args>
Result<std::vector<QueryRun>> queryRuns(const Args &args) {
  if constexpr (std::is_same_v<Args, AttentionGradArgs>)
    if (args.dlse)
      return Status::invalidInput("a prefix-causal backward takes no dlse");
  if (!args.keyPositions().isOneRun())
    return Status::invalidInput("a prefix-causal call takes keys in one run");
  RowPositions queries = args.queries();
  std::vector<QueryRun> runs;
  int64_t second = queries.isOneRun() ? args.seqLen : queries.secondRow;
  for (auto [row, rows] : {std::pair{int64_t{0}, second},
                           std::pair{second, args.seqLen - second}}) {
    if (rows <= 0)
      continue;
    int64_t first = queries.at(row);
    if (first < 0 || first + rows > args.keys())
      return Status::invalidInput(
          "a prefix-causal call takes queries that see a prefix of the keys; "
          "rows " +
          std::to_string(row) + ".." + std::to_string(row + rows - 1) +
          " at key position " + std::to_string(first) + " of " +
          std::to_string(args.keys()) + " do not");
    if (!runs.empty() && runs.back().keys == first)
      runs.back() = {runs.back().row, runs.back().rows + rows, first + rows};
    else
      runs.push_back({row, rows, first + rows});
  }
  return runs;
}

} // namespace sharc::kernels
