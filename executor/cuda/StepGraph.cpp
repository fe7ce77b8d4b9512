//===- StepGraph.cpp - one rank's step as a CUDA graph --------------------===//

#include "executor/cuda/StepGraph.h"

#include "kernels/cuda/Launch.h"

namespace sharc::exec {

StepGraph::~StepGraph() {
  if (exec_)
    (void)cudaGraphExecDestroy(exec_);
  for (cudaEvent_t event : events_)
    (void)cudaEventDestroy(event);
}

Status StepGraph::begin(const std::vector<cudaStream_t> &streams) {
  if (streams.empty())
    return Status::invalidInput("a step graph needs a stream");
  streams_ = streams;
  while (events_.size() < streams.size()) {
    cudaEvent_t event = nullptr;
    SHARC_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    events_.push_back(event);
  }
  // Thread-local: every rank's thread captures its own streams at once.
  SHARC_CUDA(
      cudaStreamBeginCapture(streams_[0], cudaStreamCaptureModeThreadLocal));
  SHARC_CUDA(cudaEventRecord(events_[0], streams_[0]));
  for (size_t s = 1; s < streams_.size(); ++s)
    SHARC_CUDA(cudaStreamWaitEvent(streams_[s], events_[0], 0));
  return Status::ok();
}

Status StepGraph::end() {
  for (size_t s = 1; s < streams_.size(); ++s) {
    SHARC_CUDA(cudaEventRecord(events_[s], streams_[s]));
    SHARC_CUDA(cudaStreamWaitEvent(streams_[0], events_[s], 0));
  }
  cudaGraph_t graph = nullptr;
  SHARC_CUDA(cudaStreamEndCapture(streams_[0], &graph));
  cudaError_t error = cudaGraphInstantiate(&exec_, graph, 0);
  (void)cudaGraphDestroy(graph);
  if (error != cudaSuccess) {
    exec_ = nullptr;
    return kernels::cuda::cudaStatus(error, "cudaGraphInstantiate");
  }
  return Status::ok();
}

Status StepGraph::replay() {
  if (!exec_)
    return Status::invalidInput("no step was captured");
  SHARC_CUDA(cudaGraphLaunch(exec_, streams_[0]));
  return Status::ok();
}

} // namespace sharc::exec
