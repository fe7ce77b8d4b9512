//===- PeerMemoryCommunicatorTest.cpp - shared GPUs' collectives, checked -===//
//
// PeerMemoryCommunicator (ranks sharing GPUs, collectives by copies and
// reductions on each rank's stream) against LocalCommunicator, the cpu
// backend's, on the same random inputs: four ranks of a dp 2 x tp 2 mesh
// on the visible GPUs round-robin (all on one where there is one), every
// collective over one axis, a set of axes and the world, in place and not,
// and point-to-point rings with several messages in flight. Inputs are
// multiples of 1/8, so f32 sums of four are exact; bf16 sums are fp32 sums
// rounded once on both sides. The comparison is equality. Exits 77 (ctest's
// skip) where no GPU is visible.
//
//===----------------------------------------------------------------------===//

#include "executor/cuda/PeerMemoryCommunicator.h"
#include "executor/Communicator.h"
#include "executor/ShardLayout.h"

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cstdlib>
#include <functional>
#include <random>
#include <thread>

using namespace sharc;
using namespace sharc::exec;

namespace {

const std::vector<plan::MeshAxis> kMesh{{"dp", 2}, {"tp", 2}};
constexpr int64_t kRanks = 4;

/// Each rank's input: distinct values per rank and element, in `dtype`'s
/// bytes (f32 or bf16; every value is exact in both).
std::vector<std::vector<std::byte>> inputs(int64_t numel, DType dtype,
                                           uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int> value(-500, 500);
  std::vector<std::vector<std::byte>> out(kRanks);
  for (auto &x : out) {
    std::vector<float> floats;
    for (int64_t i = 0; i < numel; ++i)
      floats.push_back(static_cast<float>(value(generator)) / 8.0f);
    x.resize(static_cast<size_t>(numel * dtypeSize(dtype)));
    convertElements(floats.data(), DType::F32, x.data(), dtype, numel);
  }
  return out;
}

/// One rank's part: x is its input (device or host memory as the
/// communicator's), y its output; in place, y == x.
using Collective = std::function<Status(Communicator &, void *x, void *y)>;

using Bytes = std::vector<std::vector<std::byte>>;

/// Runs `call` on every rank with the cpu's communicator.
Bytes onCpu(const Bytes &in, int64_t outBytes, bool inPlace,
            const Collective &call) {
  CommWorld world(kMesh);
  Bytes data = in,
        out(kRanks, std::vector<std::byte>(static_cast<size_t>(outBytes),
                                           std::byte{0x7f}));
  std::vector<Status> statuses(kRanks);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      LocalCommunicator comm = world.communicator(r);
      statuses[r] =
          call(comm, data[r].data(), inPlace ? data[r].data() : out[r].data());
    });
  for (auto &thread : threads)
    thread.join();
  for (const Status &status : statuses)
    REQUIRE(status.message() == "");
  if (inPlace)
    for (int64_t r = 0; r < kRanks; ++r)
      out[r].assign(data[r].begin(), data[r].begin() + outBytes);
  return out;
}

/// The same with every rank's buffers on GPU r % count, one host thread a
/// rank (as the cuda backend enqueues) and outputs poisoned first.
Bytes onSharedGpus(const Bytes &in, int64_t outBytes, bool inPlace,
                   const Collective &call) {
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  for (int a = 0; a < count; ++a)
    for (int b = 0; b < count; ++b) {
      int can = 0;
      cudaDeviceCanAccessPeer(&can, a, b);
      if (a != b && can) {
        cudaSetDevice(a);
        cudaDeviceEnablePeerAccess(b, 0);
        (void)cudaGetLastError();
      }
    }
  CommWorld world(kMesh, /*timeoutSeconds=*/30);
  PeerMemoryWorld peers(kMesh, /*timeoutSeconds=*/30);
  Bytes out(kRanks, std::vector<std::byte>(static_cast<size_t>(outBytes)));
  std::vector<Status> statuses(kRanks);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      auto fail = [&](const char *what) {
        statuses[r] = Status::runtimeError(what);
      };
      int device = static_cast<int>(r % count);
      if (cudaSetDevice(device) != cudaSuccess)
        return fail("cudaSetDevice");
      cudaStream_t stream = nullptr;
      void *x = nullptr, *y = nullptr;
      auto inBytes = static_cast<int64_t>(in[r].size());
      if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) !=
              cudaSuccess ||
          cudaMalloc(&x, std::max(inBytes, outBytes)) != cudaSuccess ||
          cudaMalloc(&y, outBytes) != cudaSuccess)
        return fail("allocation");
      cudaMemcpy(x, in[r].data(), inBytes, cudaMemcpyHostToDevice);
      cudaMemset(y, 0xff, outBytes); // NaN: unwritten elements show
      {
        PeerMemoryCommunicator comm(world.communicator(r), peers, world, device,
                                    stream);
        statuses[r] = call(comm, x, inPlace ? x : y);
        if (statuses[r] && cudaStreamSynchronize(stream) != cudaSuccess)
          fail("cudaStreamSynchronize");
      }
      cudaMemcpy(out[r].data(), inPlace ? x : y, outBytes,
                 cudaMemcpyDeviceToHost);
      cudaFree(x);
      cudaFree(y);
      cudaStreamDestroy(stream);
    });
  for (auto &thread : threads)
    thread.join();
  for (const Status &status : statuses)
    REQUIRE(status.message() == "");
  return out;
}

void requireGpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
    WARN("skipped: needs a GPU");
    std::exit(77);
  }
}

/// Both communicators, compared rank by rank.
void checkSame(const Bytes &in, int64_t outBytes, bool inPlace,
               const Collective &call) {
  Bytes gpu = onSharedGpus(in, outBytes, inPlace, call);
  Bytes cpu = onCpu(in, outBytes, inPlace, call);
  for (int64_t r = 0; r < kRanks; ++r) {
    INFO("rank " << r);
    CHECK(gpu[r] == cpu[r]);
  }
}

const char *const kAxes[] = {"tp", "dp", "dp,tp", "world"};

} // namespace

TEST_CASE("shared GPUs' all_reduce equals the cpu's, in place and not") {
  requireGpu();
  const int64_t n = 3001;
  for (DType dtype : {DType::F32, DType::BF16})
    for (const char *axis : kAxes)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max})
        for (bool inPlace : {false, true}) {
          INFO(dtypeName(dtype)
               << " over " << axis << " max " << (op == ReduceOp::Max)
               << " in place " << inPlace);
          auto in = inputs(n, dtype, 1);
          // Twice in a row: the second reads what the first wrote, so a
          // member overwriting its input before the others read it shows.
          checkSame(in, n * dtypeSize(dtype), inPlace,
                    [&](Communicator &comm, void *x, void *y) {
                      SHARC_TRY(comm.allReduce(x, y, dtype, n, op, axis));
                      return comm.allReduce(y, y, dtype, n, op, axis);
                    });
        }
}

TEST_CASE("shared GPUs' all_gather and reduce_scatter equal the cpu's along "
          "every dimension") {
  requireGpu();
  const std::vector<int64_t> shape{4, 12, 8};
  int64_t numel = numElements(shape);
  auto in = inputs(numel, DType::F32, 2);
  for (const char *axis : kAxes) {
    int64_t members =
        std::string(axis) == "world" || std::string(axis) == "dp,tp" ? 4 : 2;
    for (int64_t dim = 0; dim < 3; ++dim) {
      INFO("over " << axis << " dim " << dim);
      checkSame(in, numel * members * 4, false,
                [&](Communicator &comm, void *x, void *y) {
                  return comm.allGather(x, y, DType::F32, shape, dim, axis);
                });
      checkSame(in, numel / members * 4, false,
                [&](Communicator &comm, void *x, void *y) {
                  return comm.reduceScatter(x, y, DType::F32, shape, dim, axis);
                });
      // In place: the piece lands at the front of the member's own input.
      checkSame(in, numel / members * 4, true,
                [&](Communicator &comm, void *x, void *y) {
                  return comm.reduceScatter(x, y, DType::F32, shape, dim, axis);
                });
    }
  }
}

TEST_CASE("shared GPUs' all_to_all equals the cpu's for every split and "
          "concat dimension") {
  requireGpu();
  const std::vector<int64_t> shape{8, 4, 12};
  int64_t numel = numElements(shape);
  auto in = inputs(numel, DType::BF16, 3);
  for (const char *axis : {"tp", "dp,tp"})
    for (int64_t split = 0; split < 3; ++split)
      for (int64_t concat = 0; concat < 3; ++concat) {
        if (split == concat)
          continue;
        INFO("over " << axis << " split " << split << " concat " << concat);
        checkSame(in, numel * 2, false,
                  [&](Communicator &comm, void *x, void *y) {
                    return comm.allToAll(x, y, DType::BF16, shape, split,
                                         concat, axis);
                  });
      }
}

TEST_CASE("shared GPUs' sends and recvs pair in order with several in "
          "flight") {
  requireGpu();
  const int64_t n = 777, bytes = n * 4;
  auto in = inputs(3 * n, DType::F32, 4);
  for (const char *axis : {"tp", "dp"})
    for (int round = 0; round < 2; ++round) {
      INFO("over " << axis << " round " << round);
      // Around the ring: three messages to the next member, then three
      // from the previous, the k-th into third k of y (third 2 - k on the
      // second round, so the slots are reused for other buffers).
      checkSame(in, 3 * bytes, false,
                [&](Communicator &comm, void *x, void *y) {
                  int64_t size = comm.groupSize(axis);
                  int64_t me = comm.groupIndex(axis);
                  auto *from = static_cast<std::byte *>(x);
                  auto *to = static_cast<std::byte *>(y);
                  for (int64_t k = 0; k < 3; ++k)
                    SHARC_TRY(comm.send(from + k * bytes, bytes,
                                        (me + 1) % size, k, axis));
                  for (int64_t k = 0; k < 3; ++k) {
                    int64_t slot = round == 0 ? k : 2 - k;
                    SHARC_TRY(comm.recv(to + slot * bytes, bytes,
                                        (me + size - 1) % size, k, axis));
                  }
                  return Status::ok();
                });
    }
}
