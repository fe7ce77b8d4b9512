//===- KernelsCudaMixedTest.cpp - cuda adamw with an f32 master vs cpu ----===//
//
// bf16-mixed's update (kernels/AdamW.h: a bf16 parameter and gradient, an
// f32 master and f32 moments) on the device against the cpu's bits: alone
// and grouped beside plain updates, aligned and not, clipped and not.
// Exits 77 without a device.
//
//===----------------------------------------------------------------------===//

#include "kernels/AdamW.h"
#include "kernels/cuda/DeviceInfo.h"
#include "tests/unit/kernels/CudaPairs.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

namespace {

/// One update's tensors on both sides; the master starts as the values
/// the bf16 parameter rounds.
struct MixedTensors {
  MixedTensors(int64_t numel, int64_t offset, bool withMaster,
               std::mt19937 &rng) {
    std::vector<double> weights = randomValues(numel, rng);
    std::vector<double> vValues = randomValues(numel, rng, 0.01);
    for (double &value : vValues)
      value = std::abs(value);
    DType weightType = withMaster ? DType::BF16 : DType::F32;
    param = std::make_unique<Pair>(weightType, weights, offset);
    master = std::make_unique<Pair>(DType::F32, weights, offset);
    m = std::make_unique<Pair>(DType::F32, randomValues(numel, rng, 0.1),
                               offset);
    v = std::make_unique<Pair>(DType::F32, vValues, offset);
    grad =
        std::make_unique<Pair>(DType::BF16, randomValues(numel, rng), offset);
    this->numel = numel;
    this->withMaster = withMaster;
  }
  AdamWArgs args(bool onDevice, const float *gradNormSq) {
    AdamWArgs result{.param = param->out(onDevice),
                     .m = m->out(onDevice),
                     .v = v->out(onDevice),
                     .grad = grad->in(onDevice),
                     .numel = numel,
                     .step = 3,
                     .lr = 1e-3,
                     .eps = 1e-6,
                     .weightDecay = 0.1,
                     .gradNormSq = gradNormSq,
                     .maxNorm = gradNormSq ? 0.5f : 0.0f};
    if (withMaster)
      result.master = master->out(onDevice);
    return result;
  }
  void requireMatch() {
    param->requireMatch(0.0);
    m->requireMatch(0.0);
    v->requireMatch(0.0);
    if (withMaster)
      master->requireMatch(0.0);
  }
  std::unique_ptr<Pair> param, master, m, v, grad;
  int64_t numel = 0;
  bool withMaster = false;
};

} // namespace

TEST_CASE("a cuda adamw with an f32 master equals the cpu's bits", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  std::mt19937 rng(97);
  for (int64_t offset : {0, 1})
    for (bool clips : {false, true}) {
      INFO("offset " << offset << (clips ? ", clipped" : ""));
      MixedTensors tensors(1001, offset, /*withMaster=*/true, rng);
      ScalarPair norm(9.0f);
      tensors.requireMatch(); // both sides start equal
      cpu::adamw(tensors.args(false, clips ? norm.on(false) : nullptr));
      requireRan(cuda::adamw(
          tensors.args(true, clips ? norm.on(true) : nullptr), nullptr));
      tensors.requireMatch();
    }
}

TEST_CASE("a grouped cuda adamw mixes master and plain updates, cpu's bits",
          "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  std::mt19937 rng(99);
  // Across the kernel's 4096-element chunks, unaligned, with and without
  // a master, in one launch.
  struct Member {
    int64_t numel, offset;
    bool withMaster;
  };
  const Member members[] = {
      {96, 0, true}, {40000, 1, true}, {16384, 0, false}, {50001, 1, true}};
  std::vector<std::unique_ptr<MixedTensors>> tensors;
  std::vector<AdamWArgs> deviceArgs;
  std::vector<AdamWStepScalars> scalars;
  std::vector<int64_t> offsets;
  for (const Member &member : members) {
    tensors.push_back(std::make_unique<MixedTensors>(
        member.numel, member.offset, member.withMaster, rng));
    AdamWArgs host = tensors.back()->args(false, nullptr);
    cpu::adamw(host);
    deviceArgs.push_back(tensors.back()->args(true, nullptr));
    offsets.push_back(
        static_cast<int64_t>(scalars.size() * sizeof(AdamWStepScalars)));
    scalars.push_back(adamwScalars(host));
  }
  DeviceBuffer table(
      static_cast<int64_t>(scalars.size() * sizeof(AdamWStepScalars)));
  table.upload(scalars.data());
  auto group = cuda::AdamWGroup::create(deviceArgs, offsets);
  INFO(group.status().message());
  REQUIRE(group);
  requireRan((*group)->run(table.data(), nullptr, nullptr));
  for (size_t i = 0; i < tensors.size(); ++i) {
    INFO("member " << i);
    tensors[i]->requireMatch();
  }
}
