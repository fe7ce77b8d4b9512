//===- CostModel.h - seconds per node on a described machine ----*- C++ -*-===//
// defines: Link, Machine, parseMachine, readMachineFile, nodeSeconds,
//          checkMachineCovers
//
// A roofline for compute and an alpha-beta model for collectives:
//   compute    = launch_overhead + op_overhead[op]
//                + max(flops / peak_flops[dtype], memBytes / memory_bandwidth)
//                  / op_efficiency[op]
//   collective = alpha + commBytes / beta   (the link of its mesh axis)
// commBytes is what one rank sends, so the caller folds the algorithm in
// (a ring all_reduce of n bytes over k ranks sends 2 (k-1)/k n). A
// collective whose axis has no link (slice_to_rank, replicate: local copies
// with commBytes 0) is costed as a compute node, launch_overhead for an
// empty one.
//
// The machine is a YAML file (models/machines/h200-nvlink.yaml):
//   name: h200-nvlink
//   peak_flops: {bf16: 7.9e14, f32: 6.0e13}   # FLOP/s per dtype
//   memory_bandwidth: 4.0e12                 # bytes/s
//   launch_overhead: 4.0e-6                  # seconds per kernel
//   links: {tp: {alpha: 1.0e-5, beta: 3.0e11}} # per mesh axis
//   op_efficiency: {matmul: 0.8}             # optional, per plan op
//   op_overhead: {attention_grad: 5.8e-5}    # optional, seconds per launch
//
// op_efficiency is the fraction of the roofline an op reaches on this
// machine (the roofline term is divided by it; absent ops keep 1). It is
// what scripts/calibrate-machine.py fits from measured step traces, so
// that the model's per-op times follow the kernels sharc actually runs.
// op_overhead is the fixed part of an op's time that does not shrink with
// its size (absent ops 0); fitted beside op_efficiency from traces of
// several sizes, the two let one machine file predict small and large
// shapes alike (docs/cost-model.md).
//
//   Result<Machine> machine = readMachineFile(path);
//   if (!machine)
//     return machine.status(); // FILE:LINE:COL: message
//   double seconds = nodeSeconds(*machine, graph[i]);
#pragma once

#include "planner/ScheduleGraph.h"
#include "planner/plan/Status.h"

#include <map>
#include <string>

namespace sharc {

struct Link {
  double alpha = 0.0; ///< seconds per collective (latency)
  double beta = 1.0;  ///< bytes/s one rank sends
};

struct Machine {
  std::string name;
  std::map<std::string, double> peakFlops; ///< by dtype name ("bf16")
  double memoryBandwidth = 1.0;            ///< bytes/s
  double launchOverhead = 0.0;             ///< seconds per kernel
  std::map<std::string, Link> links;       ///< by mesh axis name
  /// Fraction of the roofline each plan op reaches; absent ops 1.
  std::map<std::string, double> opEfficiency;
  /// Seconds each launch of a plan op costs beyond launch_overhead and its
  /// roofline (ramp-up, the last partial wave); absent ops 0.
  std::map<std::string, double> opOverhead;
  /// One GPU's memory in bytes (`gpu_memory`, optional; 0 when not given):
  /// what `sharc compile --recompute auto` fits a rank's plan in when no
  /// --memory-limit-mib is given.
  double gpuMemoryBytes = 0.0;
};

/// Parses a machine description; `fileName` prefixes error locations.
/// Every key is required except `links` entries, which are per axis, and
/// `gpu_memory`;
/// rates must be positive, alpha and launch_overhead non-negative.
Result<Machine> parseMachine(const std::string &text,
                             const std::string &fileName);

/// Reads and parses a machine file; errors are invalid input.
Result<Machine> readMachineFile(const std::string &path);

/// What one launch of `op` costs before its roofline: launch_overhead plus
/// the op's op_overhead. A run of optimizer updates pays it once.
double launchSeconds(const Machine &machine, const std::string &op);

/// The predicted seconds of one node. A dtype without a peak rate falls
/// back to the slowest rate the machine lists (checkMachineCovers flags it).
double nodeSeconds(const Machine &machine, const ScheduleNode &node);

/// Invalid input when the graph names a compute dtype without a peak rate,
/// or a collective that sends bytes over an axis without a link.
Status checkMachineCovers(const Machine &machine, const ScheduleGraph &graph);

} // namespace sharc
