//===- StepGraph.h - one rank's step as a CUDA graph ------------*- C++ -*-===//
// defines: StepGraph
//
// A small model's step is hundreds of short kernels, collectives and event
// waits over two streams; enqueued one by one it is bound by the host's
// launch rate. StepGraph records the whole step once by stream capture and
// replays it as one graph launch. Capture starts on the first stream, which
// forks every other stream off an event (so their work joins the capture)
// and joins them back at the end; the plan's own events become the graph's
// dependencies, and NCCL's collectives are captured as kernels. What varies
// between steps must not be baked into launch arguments: it lives in
// device memory the runtime rewrites before each replay (StepConstants).
//
//   StepGraph graph;
//   SHARC_TRY(graph.begin(streams));   // then enqueue one step as usual
//   SHARC_TRY(graph.end());
//   SHARC_TRY(graph.replay());         // every later step
#pragma once

#include "planner/plan/Status.h"

#include <cuda_runtime.h>

#include <vector>

namespace sharc::exec {

class StepGraph {
public:
  StepGraph() = default;
  ~StepGraph();
  StepGraph(const StepGraph &) = delete;
  StepGraph &operator=(const StepGraph &) = delete;

  bool captured() const { return exec_ != nullptr; }
  /// Starts capturing everything the calling thread enqueues on `streams`.
  Status begin(const std::vector<cudaStream_t> &streams);
  /// Ends the capture and instantiates the graph.
  Status end();
  /// Launches the captured step on the first stream.
  Status replay();

private:
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_; ///< the fork, then one join per stream
  cudaGraphExec_t exec_ = nullptr;
};

} // namespace sharc::exec
