//===- CpuBackend.h - the reference backend: host, threads ------*- C++ -*-===//
// defines: createCpuBackend
//
// Each rank's regions live in an Arena, its streams are host threads that
// run every launch to completion, its events an EventBoard and its
// collectives a LocalCommunicator of one in-process CommWorld per stream
// (so two streams of a rank never share a rendezvous). In a run over
// processes (mpirun) they are ProcessCommunicators on one ProcessChannel per
// stream instead, with the same results. This is what CI runs and what the
// cuda backend is checked against.
#pragma once

#include "executor/Backend.h"

namespace sharc::exec {

/// Over processes, opens one channel per stream (a collective call of
/// every process).
Result<std::unique_ptr<Backend>>
createCpuBackend(const plan::Plan &plan, const BackendOptions &options);

} // namespace sharc::exec
