//===- MpiProcesses.cpp - the processes of an mpirun launch ---------------===//
//
// MPI's world as sharc's Processes: MPI is initialised on first use and
// finalised at exit. Only the host thread that set the run up calls MPI
// (set-up, gathers, the loss), so MPI_THREAD_FUNNELED is what it needs.
//
//===----------------------------------------------------------------------===//

#include "executor/Processes.h"

// MPI's C API only: no C++ bindings to link (Open MPI, MPICH).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace sharc::exec {

namespace {

Status mpiStatus(int code, const char *call) {
  if (code == MPI_SUCCESS)
    return Status::ok();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return Status::runtimeError(std::string("MPI: ") + call + ": " +
                              std::string(text, static_cast<size_t>(length)));
}

/// MPI counts are ints: larger blocks go in pieces of at most 1 GiB.
constexpr int64_t kMaxPiece = 1ll << 30;

class MpiProcesses final : public Processes {
public:
  MpiProcesses(int index, int count, int localIndex, std::string library)
      : index_(index), count_(count), localIndex_(localIndex),
        library_(std::move(library)) {}

  int64_t index() const override { return index_; }
  int64_t count() const override { return count_; }
  int64_t localIndex() const override { return localIndex_; }
  std::string describe() const override {
    return "MPI, process " + std::to_string(index_) + " of " +
           std::to_string(count_) + " (" + library_ + ")";
  }
  Status broadcast(void *data, int64_t numBytes, int64_t root) override {
    auto *bytes = static_cast<char *>(data);
    for (int64_t done = 0; done < numBytes; done += kMaxPiece) {
      int piece = static_cast<int>(std::min(kMaxPiece, numBytes - done));
      SHARC_TRY(mpiStatus(MPI_Bcast(bytes + done, piece, MPI_BYTE,
                                    static_cast<int>(root), MPI_COMM_WORLD),
                          "MPI_Bcast"));
    }
    return Status::ok();
  }
  Status allGather(const void *send, void *recv, int64_t numBytes) override {
    if (numBytes <= INT_MAX)
      return mpiStatus(MPI_Allgather(send, static_cast<int>(numBytes), MPI_BYTE,
                                     recv, static_cast<int>(numBytes), MPI_BYTE,
                                     MPI_COMM_WORLD),
                       "MPI_Allgather");
    // Beyond an int's count: one broadcast of each process's block.
    auto *out = static_cast<char *>(recv);
    for (int64_t p = 0; p < count_; ++p) {
      char *block = out + p * numBytes;
      if (p == index_ && send != block)
        std::memmove(block, send, static_cast<size_t>(numBytes));
      SHARC_TRY(broadcast(block, numBytes, p));
    }
    return Status::ok();
  }

private:
  int index_, count_, localIndex_;
  std::string library_;
};

void finalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Finalize();
}

} // namespace

Result<std::shared_ptr<Processes>> joinMpi() {
  static std::shared_ptr<Processes> world;
  if (world)
    return world;
  int provided = 0;
  SHARC_TRY(mpiStatus(
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided),
      "MPI_Init_thread"));
  std::atexit(finalizeAtExit);
  // Errors come back as codes, named in sharc's messages, instead of
  // MPI's default of aborting the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int index = 0, count = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &index);
  MPI_Comm_size(MPI_COMM_WORLD, &count);
  // The process's place on its node: the ranks of one shared-memory
  // domain, in world order.
  MPI_Comm node;
  SHARC_TRY(mpiStatus(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED,
                                          index, MPI_INFO_NULL, &node),
                      "MPI_Comm_split_type"));
  int localIndex = 0;
  MPI_Comm_rank(node, &localIndex);
  MPI_Comm_free(&node);
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string library(version, static_cast<size_t>(length));
  library = library.substr(0, library.find_first_of(",\n"));
  world = std::make_shared<MpiProcesses>(index, count, localIndex, library);
  return world;
}

} // namespace sharc::exec
