//===- MpiProcesses.cpp - the processes of an mpirun launch ---------------===//
//
// MPI's world as sharc's Processes: MPI is initialised on first use and
// finalised at exit. The host thread that set the run up calls MPI for the
// set-up, gathers and the loss; on the cpu backend every rank's stream
// threads also send and receive their collectives' messages on
// ProcessChannels (a communicator of their own per stream), at once, which
// needs MPI_THREAD_MULTIPLE. A library without it runs the cuda backend
// (whose step collectives are NCCL's) and refuses the cpu's.
//
//===----------------------------------------------------------------------===//

#include "executor/Deadline.h"
#include "executor/Processes.h"

// MPI's C API only: no C++ bindings to link (Open MPI, MPICH).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <list>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

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

/// Tagged messages on a communicator of the channel's own. A message goes
/// in pieces of at most kMaxPiece bytes, the last one shorter (empty where
/// the size is a multiple): the receiver takes pieces until a short one.
/// A message between two ranks of this process (two or more ranks per
/// process) stays in it: queued under its tag and taken from the queue,
/// without MPI's copy or the receiver's polling.
class MpiChannel final : public ProcessChannel {
public:
  explicit MpiChannel(MPI_Comm comm) : comm_(comm) {
    int self = 0;
    MPI_Comm_rank(comm_, &self);
    self_ = self;
    int *upperBound = nullptr, found = 0;
    MPI_Comm_get_attr(comm_, MPI_TAG_UB, &upperBound, &found);
    maxTag_ = found && upperBound ? *upperBound : 32767;
    try {
      progress_ = std::thread([this] { driveSends(); });
    } catch (const std::system_error &) {
      // No thread to spare: sends move while their sender calls MPI.
    }
  }
  ~MpiChannel() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    sendsQueued_.notify_all();
    if (progress_.joinable())
      progress_.join();
    // Sends the peers never took (a failed run) are cancelled after a
    // grace period, so that MPI_Comm_free does not wait on them.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::lock_guard<std::mutex> lock(mutex_);
    while (!reapLocked() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (Pending &pending : pending_)
      for (MPI_Request &request : pending.requests)
        if (request != MPI_REQUEST_NULL) {
          MPI_Cancel(&request);
          MPI_Request_free(&request);
        }
    MPI_Comm_free(&comm_);
  }

  Result<uint64_t> send(int64_t to, int64_t tag,
                        std::vector<std::byte> message) override {
    if (to == self_) {
      // Taken by this process's own receive: sent once queued.
      std::lock_guard<std::mutex> lock(localMutex_);
      local_[tag].push_back(std::move(message));
      localArrived_.notify_all();
      return uint64_t{0};
    }
    std::lock_guard<std::mutex> lock(mutex_);
    reapLocked();
    Pending &pending = pending_.emplace_back();
    pending.ticket = ++lastTicket_;
    pending.bytes = std::move(message);
    int64_t size = static_cast<int64_t>(pending.bytes.size());
    for (int64_t at = 0;; at += kMaxPiece) {
      int piece = static_cast<int>(std::min(kMaxPiece, size - at));
      MPI_Request request = MPI_REQUEST_NULL;
      SHARC_TRY(mpiStatus(MPI_Isend(pending.bytes.data() + at, piece, MPI_BYTE,
                                    static_cast<int>(to), static_cast<int>(tag),
                                    comm_, &request),
                          "MPI_Isend"));
      pending.requests.push_back(request);
      if (piece < kMaxPiece) {
        sendsQueued_.notify_one();
        return pending.ticket;
      }
    }
  }

  Status waitSent(uint64_t ticket, double timeoutSeconds,
                  const std::atomic<bool> &aborted) override {
    auto deadline = deadlineAfter(timeoutSeconds);
    for (int idle = 0;; ++idle) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        reapLocked();
        bool inFlight = false;
        for (const Pending &pending : pending_)
          inFlight |= pending.ticket == ticket;
        if (!inFlight)
          return Status::ok();
      }
      if (aborted.load())
        return Status::runtimeError("aborted, another rank failed");
      if (std::chrono::steady_clock::now() >= deadline)
        return Status::runtimeError("timed out, the receiver never took it");
      pause(idle);
    }
  }

  Result<std::vector<std::byte>>
  receive(int64_t from, int64_t tag, double timeoutSeconds,
          const std::atomic<bool> &aborted) override {
    auto deadline = deadlineAfter(timeoutSeconds);
    if (from == self_)
      return receiveLocal(tag, deadline, aborted);
    std::vector<std::byte> message;
    for (int idle = 0;;) {
      int found = 0;
      MPI_Message handle;
      MPI_Status status;
      SHARC_TRY(
          mpiStatus(MPI_Improbe(static_cast<int>(from), static_cast<int>(tag),
                                comm_, &found, &handle, &status),
                    "MPI_Improbe"));
      if (found) {
        int count = 0;
        MPI_Get_count(&status, MPI_BYTE, &count);
        size_t at = message.size();
        message.resize(at + static_cast<size_t>(count));
        SHARC_TRY(mpiStatus(MPI_Mrecv(message.data() + at, count, MPI_BYTE,
                                      &handle, MPI_STATUS_IGNORE),
                            "MPI_Mrecv"));
        if (count < kMaxPiece)
          return message;
        idle = 0;
        continue;
      }
      if (aborted.load())
        return Status::runtimeError("aborted, another rank failed");
      if (std::chrono::steady_clock::now() >= deadline)
        return Status::runtimeError(
            message.empty() ? "timed out, nothing was sent"
                            : "timed out in the middle of a message");
      pause(++idle);
    }
  }

  int64_t maxTag() const override { return maxTag_; }

private:
  Result<std::vector<std::byte>>
  receiveLocal(int64_t tag, std::chrono::steady_clock::time_point deadline,
               const std::atomic<bool> &aborted) {
    std::unique_lock<std::mutex> lock(localMutex_);
    for (;;) {
      auto queue = local_.find(tag);
      if (queue != local_.end() && !queue->second.empty()) {
        std::vector<std::byte> message = std::move(queue->second.front());
        queue->second.pop_front();
        return message;
      }
      if (aborted.load())
        return Status::runtimeError("aborted, another rank failed");
      auto now = std::chrono::steady_clock::now();
      if (now >= deadline)
        return Status::runtimeError("timed out, nothing was sent");
      // The abort flag has no notification of its own: look again soon.
      localArrived_.wait_until(
          lock, std::min(deadline, now + std::chrono::milliseconds(10)));
    }
  }

  struct Pending {
    uint64_t ticket = 0;
    std::vector<std::byte> bytes;
    std::vector<MPI_Request> requests;
  };
  /// Between polls (a probe or a test is how a thread waits on MPI): spin
  /// briefly, then give the core away, as ranks' streams share a small host.
  static void pause(int idle) {
    if (idle > 64)
      std::this_thread::sleep_for(
          std::chrono::microseconds(std::min(idle, 1000)));
  }
  /// The progress thread: a large message moves only while some thread
  /// of its sender calls MPI, and a pipeline stage that sent one goes on
  /// computing. While sends are in flight this thread tests them (which
  /// drives MPI's progress), pausing between tests; otherwise it sleeps.
  void driveSends() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (int idle = 0;;) {
      sendsQueued_.wait(lock,
                        [this] { return stopping_ || !pending_.empty(); });
      if (stopping_)
        return;
      if (reapLocked()) {
        idle = 0;
        continue;
      }
      lock.unlock();
      pause(++idle);
      lock.lock();
    }
  }

  /// Drops the sends that completed; whether none is left.
  bool reapLocked() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool done = true;
      for (MPI_Request &request : it->requests) {
        int complete = 0;
        if (request != MPI_REQUEST_NULL)
          MPI_Test(&request, &complete, MPI_STATUS_IGNORE);
        done &= request == MPI_REQUEST_NULL;
      }
      it = done ? pending_.erase(it) : std::next(it);
    }
    return pending_.empty();
  }

  MPI_Comm comm_;
  int64_t self_ = 0; ///< this process's rank in comm_
  int64_t maxTag_ = 32767;
  /// Messages between ranks of this process, by tag, in send order.
  std::mutex localMutex_;
  std::condition_variable localArrived_;
  std::map<int64_t, std::deque<std::vector<std::byte>>> local_;
  std::mutex mutex_;
  uint64_t lastTicket_ = 0;
  std::list<Pending> pending_;
  std::condition_variable sendsQueued_;
  bool stopping_ = false;
  std::thread progress_; ///< last: started once the rest is built
};

class MpiProcesses final : public Processes {
public:
  MpiProcesses(int index, int count, int localIndex, std::string library,
               bool threadsMultiple)
      : index_(index), count_(count), localIndex_(localIndex),
        library_(std::move(library)), threadsMultiple_(threadsMultiple) {}

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
  void abortAll(int exitCode) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exitCode);
  }
  Result<std::unique_ptr<ProcessChannel>> openChannel() override {
    if (!threadsMultiple_)
      return Status::invalidInput(
          "the cpu backend over processes needs MPI_THREAD_MULTIPLE, which " +
          library_ +
          " does not provide: run one process, or the cuda "
          "backend");
    MPI_Comm comm;
    SHARC_TRY(mpiStatus(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup"));
    return std::unique_ptr<ProcessChannel>(std::make_unique<MpiChannel>(comm));
  }

private:
  int index_, count_, localIndex_;
  std::string library_;
  bool threadsMultiple_;
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
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided),
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
  world = std::make_shared<MpiProcesses>(index, count, localIndex, library,
                                         provided == MPI_THREAD_MULTIPLE);
  return world;
}

} // namespace sharc::exec
