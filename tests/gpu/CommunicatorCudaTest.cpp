//===- CommunicatorCudaTest.cpp - NCCL's collectives against the cpu's ----===//
//
// NcclCommunicator on two GPUs of one process against LocalCommunicator,
// the cpu backend's in-process collectives, on the same random inputs:
// all_to_all with every placement of its split and concatenated dimensions
// (staged or not), and collectives over a set of axes ("dp,tp") through a
// group of their own. Values are exact in f32 (every element is moved or
// summed over two ranks), so the comparison is equality. Exits 77 (ctest's
// skip) where fewer than two GPUs are visible.
//
//===----------------------------------------------------------------------===//

#include "executor/Communicator.h"
#include "executor/Processes.h"
#include "executor/ShardLayout.h"
#include "executor/cuda/NcclCommunicator.h"

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cstdlib>
#include <functional>
#include <random>
#include <thread>

using namespace sharc;
using namespace sharc::exec;

namespace {

constexpr int64_t kRanks = 2;

/// Each rank's input: distinct values per rank and element.
std::vector<std::vector<float>> inputs(int64_t numel, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int> value(-1000, 1000);
  std::vector<std::vector<float>> out(kRanks);
  for (auto &x : out)
    for (int64_t i = 0; i < numel; ++i)
      x.push_back(static_cast<float>(value(generator)) / 8.0f);
  return out;
}

using Collective = std::function<Status(Communicator &, const void *, void *)>;

/// Runs `call` on every rank of `mesh` with the cpu's communicator.
std::vector<std::vector<float>> onCpu(const std::vector<plan::MeshAxis> &mesh,
                                      const std::vector<std::vector<float>> &in,
                                      int64_t outNumel,
                                      const Collective &call) {
  CommWorld world(mesh);
  std::vector<std::vector<float>> out(kRanks,
                                      std::vector<float>(outNumel, -7.f));
  std::vector<Status> statuses(kRanks);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      LocalCommunicator comm = world.communicator(r);
      statuses[r] = call(comm, in[r].data(), out[r].data());
    });
  for (auto &thread : threads)
    thread.join();
  for (const Status &status : statuses)
    REQUIRE(status.message() == "");
  return out;
}

/// The same on GPUs 0 and 1 through NCCL (one host thread per rank, as the
/// cuda backend enqueues), outputs poisoned first.
std::vector<std::vector<float>>
onGpus(const std::vector<plan::MeshAxis> &mesh,
       const std::vector<std::string> &multiAxisKeys,
       const std::vector<std::vector<float>> &in, int64_t outNumel,
       const Collective &call) {
  auto groups = NcclGroups::create(mesh, 1, RankSpan{0, kRanks, kRanks}, 0,
                                   *singleProcess(), multiAxisKeys);
  REQUIRE(groups.status().message() == "");
  std::vector<std::vector<float>> out(kRanks,
                                      std::vector<float>(outNumel, 0.f));
  std::vector<Status> statuses(kRanks);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      auto fail = [&](const char *what) {
        statuses[r] = Status::runtimeError(what);
      };
      if (cudaSetDevice(static_cast<int>(r)) != cudaSuccess)
        return fail("cudaSetDevice");
      cudaStream_t stream = nullptr;
      void *x = nullptr, *y = nullptr, *staging = nullptr;
      int64_t inBytes = static_cast<int64_t>(in[r].size() * 4);
      int64_t stagingBytes = 4 * std::max(inBytes, outNumel * 4);
      if (cudaStreamCreate(&stream) != cudaSuccess ||
          cudaMalloc(&x, inBytes) != cudaSuccess ||
          cudaMalloc(&y, outNumel * 4) != cudaSuccess ||
          cudaMalloc(&staging, stagingBytes) != cudaSuccess)
        return fail("allocation");
      cudaMemcpy(x, in[r].data(), inBytes, cudaMemcpyHostToDevice);
      cudaMemset(y, 0xff, outNumel * 4); // NaN: unwritten elements show
      NcclCommunicator comm(**groups, r, 0, stream, staging, stagingBytes);
      statuses[r] = call(comm, x, y);
      if (statuses[r] && cudaStreamSynchronize(stream) != cudaSuccess)
        fail("cudaStreamSynchronize");
      cudaMemcpy(out[r].data(), y, outNumel * 4, cudaMemcpyDeviceToHost);
      cudaFree(x);
      cudaFree(y);
      cudaFree(staging);
      cudaStreamDestroy(stream);
    });
  for (auto &thread : threads)
    thread.join();
  for (const Status &status : statuses)
    REQUIRE(status.message() == "");
  return out;
}

void requireTwoGpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < kRanks) {
    WARN("skipped: needs two GPUs");
    std::exit(77);
  }
}

} // namespace

TEST_CASE("NCCL all_to_all equals the cpu's for every split and concat "
          "dimension") {
  requireTwoGpus();
  const std::vector<int64_t> shape{6, 4, 10};
  std::vector<plan::MeshAxis> mesh{{"cp", 2}};
  auto in = inputs(numElements(shape), 1);
  for (int64_t split = 0; split < 3; ++split)
    for (int64_t concat = 0; concat < 3; ++concat) {
      if (split == concat)
        continue;
      INFO("split " << split << " concat " << concat);
      Collective call = [&](Communicator &comm, const void *x, void *y) {
        return comm.allToAll(x, y, DType::F32, shape, split, concat, "cp");
      };
      auto gpu = onGpus(mesh, {}, in, numElements(shape), call);
      auto cpu = onCpu(mesh, in, numElements(shape), call);
      CHECK(gpu == cpu);
      CHECK(gpu[0] != in[0]); // the exchange moved something
    }
}

TEST_CASE("collectives over a set of axes go through one group of their "
          "own") {
  requireTwoGpus();
  // dp and tp of a 1 x 2 mesh, and the reverse: the set's group holds both
  // ranks either way, indexed with the key's first axis outermost.
  for (auto mesh : {std::vector<plan::MeshAxis>{{"dp", 1}, {"tp", 2}},
                    std::vector<plan::MeshAxis>{{"dp", 2}, {"tp", 1}}}) {
    INFO("mesh dp " << mesh[0].size << " tp " << mesh[1].size);
    auto groups = NcclGroups::create(mesh, 1, RankSpan{0, kRanks, kRanks}, 0,
                                     *singleProcess(), {"dp,tp"});
    REQUIRE(groups.status().message() == "");
    CHECK((*groups)->hasGroup("dp,tp"));
    CHECK((*groups)->groupSize("dp,tp") == 2);
    CHECK((*groups)->groupIndex(1, "dp,tp") == 1);
    const int64_t n = 1000;
    auto in = inputs(n, 2);
    Collective sum = [](Communicator &comm, const void *x, void *y) {
      return comm.allReduce(x, y, DType::F32, n, ReduceOp::Sum, "dp,tp");
    };
    CHECK(onGpus(mesh, {"dp,tp"}, in, n, sum) == onCpu(mesh, in, n, sum));
    Collective gather = [](Communicator &comm, const void *x, void *y) {
      return comm.allGather(x, y, DType::F32, {10, n / 10}, 1, "dp,tp");
    };
    CHECK(onGpus(mesh, {"dp,tp"}, in, 2 * n, gather) ==
          onCpu(mesh, in, 2 * n, gather));
  }
}
