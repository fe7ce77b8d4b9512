//===- KernelsCudaOpsTest.cpp - the cuda kernels against the cpu ones -----===//
//
// Every cuda:: op runs on random non-zero inputs with odd shapes, in f32 and
// bf16, with its outputs poisoned (0xff bytes, NaN in both) before the
// launch, and must hold no NaN and match the cpu:: op on the same stored
// inputs: f32 within 1e-5 (1e-4 where a reduction runs in another order),
// bf16 outputs within 1e-2 of the cpu's bf16 outputs, and exactly where the
// kernel promises the cpu's bits. Each op's arguments are written once, as
// a function of the side (host or device) they point at (CudaPairs.h).
// RMSNorm is in KernelsCudaNormTest.cpp, the loss kernels in
// KernelsCudaLossTest.cpp. Exits 77 (ctest's skip
// code for this test) on a machine without a device.
//
//===----------------------------------------------------------------------===//

#include "kernels/AdamW.h"
#include "kernels/Elementwise.h"
#include "kernels/Embedding.h"
#include "kernels/RmsNorm.h"
#include "kernels/Rope.h"
#include "kernels/cuda/DeviceInfo.h"
#include "tests/unit/kernels/AdamWNonFiniteCases.h"
#include "tests/unit/kernels/CudaPairs.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

TEST_CASE("cuda add, swiglu and swiglu_grad match the cpu", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  std::mt19937 rng(61);
  const int64_t numel = 1001; // vectors of 4, then a tail of 1
  for (DType dtype : kFloatTypes) {
    INFO("dtype " << dtypeName(dtype));
    Pair a(dtype, randomValues(numel, rng)), b(dtype, randomValues(numel, rng));
    Pair dy(dtype, randomValues(numel, rng));
    Pair sum(dtype, numel), y(dtype, numel), dgate(dtype, numel),
        dup(dtype, numel);
    auto add = [&](bool onDevice) {
      return AddArgs{.a = a.in(onDevice),
                     .b = b.in(onDevice),
                     .y = sum.out(onDevice),
                     .numel = numel};
    };
    cpu::add(add(false));
    requireRan(cuda::add(add(true), nullptr));
    sum.requireMatch(0.0);

    auto swiglu = [&](bool onDevice) {
      return SwigluArgs{.gate = a.in(onDevice),
                        .up = b.in(onDevice),
                        .y = y.out(onDevice),
                        .numel = numel};
    };
    cpu::swiglu(swiglu(false));
    requireRan(cuda::swiglu(swiglu(true), nullptr));
    y.requireMatch(tolerance(dtype, 1e-5));

    auto grad = [&](bool onDevice) {
      return SwigluGradArgs{.gate = a.in(onDevice),
                            .up = b.in(onDevice),
                            .dy = dy.in(onDevice),
                            .dgate = dgate.out(onDevice),
                            .dup = dup.out(onDevice),
                            .numel = numel};
    };
    cpu::swigluGrad(grad(false));
    requireRan(cuda::swigluGrad(grad(true), nullptr));
    dgate.requireMatch(tolerance(dtype, 1e-5));
    dup.requireMatch(tolerance(dtype, 1e-5));
  }
}

TEST_CASE("cuda packed swiglu and its gradient match the cpu", "[gpu]") {
  // gu [rows, 2 * width], read in place as gate and up (the fused gate/up
  // GEMM's output); dgu comes back poisoned, so a half left unwritten shows.
  // width 252 takes the vector path, 37 the element path.
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  std::mt19937 rng(64);
  for (int64_t width : {int64_t{252}, int64_t{37}})
    for (DType dtype : kFloatTypes) {
      INFO("width " << width << ", dtype " << dtypeName(dtype));
      const int64_t rows = 9, numel = rows * width;
      const int64_t upBytes = width * dtypeSize(dtype);
      Pair gu(dtype, randomValues(2 * numel, rng, 3.0));
      Pair dy(dtype, randomValues(numel, rng));
      Pair y(dtype, numel), dgu(dtype, 2 * numel);
      auto half = [&](auto view) {
        view.data =
            static_cast<char *>(const_cast<void *>(view.data)) + upBytes;
        return view;
      };
      auto forward = [&](bool onDevice) {
        return SwigluArgs{.gate = gu.in(onDevice),
                          .up = half(gu.in(onDevice)),
                          .y = y.out(onDevice),
                          .numel = numel,
                          .width = width,
                          .packedStride = 2 * width};
      };
      cpu::swiglu(forward(false));
      requireRan(cuda::swiglu(forward(true), nullptr));
      y.requireMatch(tolerance(dtype, 1e-5));

      auto grad = [&](bool onDevice) {
        return SwigluGradArgs{.gate = gu.in(onDevice),
                              .up = half(gu.in(onDevice)),
                              .dy = dy.in(onDevice),
                              .dgate = dgu.out(onDevice),
                              .dup = half(dgu.out(onDevice)),
                              .numel = numel,
                              .width = width,
                              .packedStride = 2 * width};
      };
      cpu::swigluGrad(grad(false));
      requireRan(cuda::swigluGrad(grad(true), nullptr));
      dgu.requireMatch(tolerance(dtype, 1e-5));
    }
}

TEST_CASE("cuda add takes mixed dtypes, unaligned views and y aliasing b",
          "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  std::mt19937 rng(62);
  const int64_t numel = 999;
  const std::vector<double> aValues = randomValues(numel, rng),
                            bValues = randomValues(numel, rng);
  SECTION("bf16 + f32 into f32, every view one element off alignment") {
    Pair a(DType::BF16, aValues, 1), b(DType::F32, bValues, 1),
        y(DType::F32, numel, 1);
    auto args = [&](bool onDevice) {
      return AddArgs{.a = a.in(onDevice),
                     .b = b.in(onDevice),
                     .y = y.out(onDevice),
                     .numel = numel};
    };
    cpu::add(args(false));
    requireRan(cuda::add(args(true), nullptr));
    y.requireMatch(0.0);
  }
  SECTION("in place: y is b") {
    Pair a(DType::F32, aValues), b(DType::F32, bValues);
    auto args = [&](bool onDevice) {
      return AddArgs{.a = a.in(onDevice),
                     .b = b.in(onDevice),
                     .y = b.out(onDevice),
                     .numel = numel};
    };
    cpu::add(args(false));
    requireRan(cuda::add(args(true), nullptr));
    b.requireMatch(0.0);
  }
}

TEST_CASE("cuda fill and scale store the cpu's bits", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  std::mt19937 rng(63);
  const int64_t numel = 1003;
  for (DType dtype : {DType::F32, DType::BF16, DType::I32}) {
    INFO("dtype " << dtypeName(dtype));
    Pair out(dtype, numel);
    auto fill = [&](bool onDevice) {
      return FillArgs{.out = out.out(onDevice),
                      .numel = numel,
                      .value = dtype == DType::I32 ? -2.7 : 0.3};
    };
    cpu::fill(fill(false));
    requireRan(cuda::fill(fill(true), nullptr));
    out.requireMatch(0.0);
  }
  for (DType xType : kFloatTypes)
    for (DType yType : kFloatTypes) {
      INFO("x " << dtypeName(xType) << ", y " << dtypeName(yType));
      Pair x(xType, randomValues(numel, rng)), y(yType, numel);
      auto scale = [&](bool onDevice) {
        return ScaleArgs{.x = x.in(onDevice),
                         .y = y.out(onDevice),
                         .numel = numel,
                         .factor = 0.37};
      };
      cpu::scale(scale(false));
      requireRan(cuda::scale(scale(true), nullptr));
      y.requireMatch(0.0);
    }
}

TEST_CASE("cuda rope matches the cpu forward and inverse", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  struct Shape {
    int64_t seqLen, batch, numHeads, headDim, positionOffset;
    double theta;
    int64_t secondRow = 0, secondStart = 0; ///< the balanced split's rows
  };
  // 17 pairs per head (not a warp), an odd head dim, large angles, and a
  // balanced rank's two runs of positions.
  const Shape shapes[] = {{37, 3, 5, 34, 0, 1e6},
                          {11, 2, 3, 7, 100, 1e4},
                          {9, 1, 2, 128, 5000, 1e6},
                          {12, 2, 3, 34, 7, 1e6, 6, 40}};
  std::mt19937 rng(65);
  for (const Shape &shape : shapes)
    for (DType dtype : kFloatTypes)
      for (bool inverse : {false, true}) {
        INFO("head dim " << shape.headDim << ", dtype " << dtypeName(dtype)
                         << ", inverse " << inverse);
        const int64_t numel =
            shape.seqLen * shape.batch * shape.numHeads * shape.headDim;
        Pair x(dtype, randomValues(numel, rng)), y(dtype, numel);
        // In place on the device, as the backward may run.
        auto args = [&](bool onDevice) {
          return RopeArgs{.x = x.in(onDevice),
                          .y = onDevice ? x.out(true) : y.out(false),
                          .seqLen = shape.seqLen,
                          .batch = shape.batch,
                          .numHeads = shape.numHeads,
                          .headDim = shape.headDim,
                          .positionOffset = shape.positionOffset,
                          .secondRow = shape.secondRow,
                          .secondStart = shape.secondStart,
                          .theta = shape.theta,
                          .inverse = inverse};
        };
        cpu::rope(args(false));
        requireRan(cuda::rope(args(true), nullptr));
        requireClose(x.deviceCopy(), y.host(), tolerance(dtype, 1e-5));
      }
}

namespace {

/// Ids spread over the shard and a margin of other shards' ids around it.
std::vector<int32_t> spreadIds(int64_t numTokens, int64_t vocabStart,
                               int64_t numRows, std::mt19937 &rng) {
  std::uniform_int_distribution<int64_t> pick(
      std::max<int64_t>(0, vocabStart - 50), vocabStart + numRows + 50);
  std::vector<int32_t> ids(numTokens);
  for (int32_t &id : ids)
    id = static_cast<int32_t>(pick(rng));
  return ids;
}

/// 4500 hits on local row 7 (more than one block's token list holds),
/// 1500 each on rows 3 and 5 (a block's rows need several batches), and
/// 1500 spread, shuffled.
std::vector<int32_t> skewedIds(int64_t vocabStart, int64_t numRows,
                               std::mt19937 &rng) {
  std::vector<int32_t> ids = spreadIds(1500, vocabStart, numRows, rng);
  ids.insert(ids.end(), 4500, static_cast<int32_t>(vocabStart + 7));
  ids.insert(ids.end(), 1500, static_cast<int32_t>(vocabStart + 3));
  ids.insert(ids.end(), 1500, static_cast<int32_t>(vocabStart + 5));
  std::shuffle(ids.begin(), ids.end(), rng);
  return ids;
}

} // namespace

TEST_CASE("cuda embedding and its grad equal the cpu's bits", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  struct Case {
    const char *name;
    int64_t numRows, hidden, vocabStart;
    std::vector<int32_t> ids;
  };
  std::mt19937 rng(66);
  const std::vector<Case> cases = {
      {"vectorised, vocab-parallel shard", 1000, 132, 500,
       spreadIds(777, 500, 1000, rng)},
      {"scalar hidden", 37, 129, 3, spreadIds(300, 3, 37, rng)},
      {"three hidden tiles, two row tiles", 600, 2100, 0,
       spreadIds(2000, 0, 600, rng)},
      {"skewed ids, scalar", 37, 129, 10, skewedIds(10, 37, rng)},
      {"skewed ids, two hidden tiles", 37, 1032, 10, skewedIds(10, 37, rng)}};
  for (const Case &c : cases)
    for (DType dtype : kFloatTypes) {
      INFO(c.name << ", dtype " << dtypeName(dtype));
      IntPair ids(c.ids);
      const int64_t tableNumel = c.numRows * c.hidden;
      const int64_t outNumel = ids.size() * c.hidden;
      Pair table(dtype, randomValues(tableNumel, rng)), out(dtype, outNumel);
      Pair dout(dtype, randomValues(outNumel, rng)), dtable(dtype, tableNumel);
      auto forward = [&](bool onDevice) {
        return EmbeddingArgs{.table = table.in(onDevice),
                             .ids = ids.on(onDevice),
                             .out = out.out(onDevice),
                             .numTokens = ids.size(),
                             .numRows = c.numRows,
                             .hidden = c.hidden,
                             .vocabStart = c.vocabStart};
      };
      cpu::embedding(forward(false));
      requireRan(cuda::embedding(forward(true), nullptr));
      out.requireMatch(0.0);

      auto backward = [&](bool onDevice) {
        return EmbeddingGradArgs{.dout = dout.in(onDevice),
                                 .ids = ids.on(onDevice),
                                 .dtable = dtable.out(onDevice),
                                 .numTokens = ids.size(),
                                 .numRows = c.numRows,
                                 .hidden = c.hidden,
                                 .vocabStart = c.vocabStart};
      };
      cpu::embeddingGrad(backward(false));
      requireRan(cuda::embeddingGrad(backward(true), nullptr));
      // Same additions in the same (token) order: the same bits.
      dtable.requireMatch(0.0);
    }
}

TEST_CASE("cuda adamw equals the cpu's bits in every storage mix", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  struct Mix {
    DType param, moments, grad;
  };
  // Pure f32, pure bf16 (bf16 moments) and f32 master weights, bf16 grads.
  const Mix mixes[] = {{DType::F32, DType::F32, DType::F32},
                       {DType::BF16, DType::BF16, DType::BF16},
                       {DType::F32, DType::F32, DType::BF16}};
  const int64_t numel = 1001;
  std::mt19937 rng(69);
  for (const Mix &mix : mixes)
    for (int64_t offset : {0, 1}) {
      INFO("param " << dtypeName(mix.param) << ", moments "
                    << dtypeName(mix.moments) << ", grad "
                    << dtypeName(mix.grad) << ", offset " << offset);
      std::vector<double> vValues = randomValues(numel, rng, 0.01);
      for (double &value : vValues)
        value = std::abs(value);
      Pair param(mix.param, randomValues(numel, rng), offset);
      Pair m(mix.moments, randomValues(numel, rng, 0.1), offset);
      Pair v(mix.moments, vValues, offset);
      Pair grad(mix.grad, randomValues(numel, rng), offset);
      auto args = [&](bool onDevice) {
        return AdamWArgs{.param = param.out(onDevice),
                         .m = m.out(onDevice),
                         .v = v.out(onDevice),
                         .grad = grad.in(onDevice),
                         .numel = numel,
                         .step = 3,
                         .lr = 1e-3,
                         .weightDecay = 0.1};
      };
      cpu::adamw(args(false));
      requireRan(cuda::adamw(args(true), nullptr));
      param.requireMatch(0.0);
      m.requireMatch(0.0);
      v.requireMatch(0.0);
    }
}

namespace {

/// One tensor of a grouped AdamW: its storage, size, offset from vector
/// alignment, and its own step, lr and weight decay (read from a device table
/// of scalars).
struct GroupMember {
  DType dtype;
  int64_t numel, offset, step;
  double lr, weightDecay;
};

/// Updates `members` as one AdamWGroup on the device and each alone on the
/// cpu, and requires the same bits in every param, m and v.
void requireGroupMatchesCpu(const std::vector<GroupMember> &members,
                            std::mt19937 &rng) {
  std::vector<std::unique_ptr<Pair>> tensors; // param, m, v, grad per member
  std::vector<AdamWArgs> hostArgs, deviceArgs;
  std::vector<AdamWStepScalars> scalars;
  std::vector<int64_t> offsets;
  for (const GroupMember &member : members) {
    std::vector<double> vValues = randomValues(member.numel, rng, 0.01);
    for (double &value : vValues)
      value = std::abs(value);
    for (const std::vector<double> &values :
         {randomValues(member.numel, rng), randomValues(member.numel, rng, 0.1),
          vValues, randomValues(member.numel, rng)})
      tensors.push_back(
          std::make_unique<Pair>(member.dtype, values, member.offset));
    size_t base = tensors.size() - 4;
    Pair &param = *tensors[base], &m = *tensors[base + 1],
         &v = *tensors[base + 2], &grad = *tensors[base + 3];
    for (bool onDevice : {false, true}) {
      AdamWArgs args{.param = param.out(onDevice),
                     .m = m.out(onDevice),
                     .v = v.out(onDevice),
                     .grad = grad.in(onDevice),
                     .numel = member.numel,
                     .step = member.step,
                     .lr = member.lr,
                     .weightDecay = member.weightDecay};
      (onDevice ? deviceArgs : hostArgs).push_back(args);
    }
    offsets.push_back(
        static_cast<int64_t>(scalars.size() * sizeof(AdamWStepScalars)));
    scalars.push_back(adamwScalars(hostArgs.back()));
  }
  for (const AdamWArgs &args : hostArgs)
    cpu::adamw(args);
  DeviceBuffer table(
      static_cast<int64_t>(scalars.size() * sizeof(AdamWStepScalars)));
  table.upload(scalars.data());
  auto group = cuda::AdamWGroup::create(deviceArgs, offsets);
  INFO(group.status().message());
  REQUIRE(group);
  requireRan((*group)->run(table.data(), nullptr, nullptr));
  for (size_t i = 0; i < tensors.size(); ++i) {
    INFO("member " << i / 4 << ", tensor " << i % 4);
    tensors[i]->requireMatch(0.0);
  }
}

} // namespace

TEST_CASE("a grouped cuda adamw equals the cpu's bits, tensor by tensor",
          "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  // Sizes below, at and across the kernel's 4096-element chunks and its
  // batches of vector steps; unaligned tensors (offset 1); both storage types.
  const std::vector<GroupMember> mixed = {
      {DType::F32, 96, 0, 1, 1e-3, 0.0},
      {DType::BF16, 16384, 0, 2, 2e-3, 0.1},
      {DType::F32, 40000, 1, 3, 5e-4, 0.01},
      {DType::BF16, 50001, 1, 4, 1e-4, 0.1},
      {DType::F32, 1, 0, 5, 1e-2, 0.0},
      // aligned, ending inside a thread's batch of vector steps, then 3
      // scalar elements
      {DType::BF16, 19467, 0, 6, 3e-4, 0.05},
      {DType::F32, 70000, 0, 7, 1e-3, 0.01}};
  std::mt19937 rng(71);
  SECTION("f32 and bf16 members") { requireGroupMatchesCpu(mixed, rng); }
  // Every member pure bf16: the kernel compiled for that storage alone.
  SECTION("bf16 members") {
    std::vector<GroupMember> bf16;
    for (GroupMember member : mixed) {
      member.dtype = DType::BF16;
      bf16.push_back(member);
    }
    requireGroupMatchesCpu(bf16, rng);
  }
}

TEST_CASE("cuda adamw flags a non-finite store as the cpu does, alone and "
          "grouped",
          "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  const int64_t numel = 1001; // vectors of 4, then a tail of 1
  std::mt19937 rng(73);
  DeviceBuffer flag(sizeof(unsigned)), table(sizeof(AdamWStepScalars));
  for (const NonFiniteCase &c : nonFiniteCases())
    // In a vector step and in the tail; aligned, and not (offset 1).
    for (int64_t special : {517, 1000})
      for (int64_t offset : {0, 1})
        for (bool grouped : {false, true}) {
          INFO(c.name << ", element " << special << ", offset " << offset
                      << (grouped ? ", grouped" : ", alone"));
          NonFiniteUpdate u(c, numel, special, rng);
          Pair weights(c.master ? DType::F32 : u.paramType, u.weights, offset),
              param(u.paramType, u.param, offset), m(u.stateType, u.m, offset),
              v(u.stateType, u.v, offset), grad(u.gradType, u.grad, offset);
          unsigned hostFlag = 0, deviceFlag = 0;
          auto *onDeviceFlag = static_cast<unsigned *>(flag.data());
          // The update of `weights`, or of its bf16 param with `weights`
          // the master.
          auto args = [&](bool onDevice) {
            AdamWArgs result{.param = weights.out(onDevice),
                             .m = m.out(onDevice),
                             .v = v.out(onDevice),
                             .grad = grad.in(onDevice),
                             .numel = numel,
                             .step = 2,
                             .lr = 1e-3,
                             .weightDecay = c.weightDecay};
            result.nonFinite = onDevice ? onDeviceFlag : &hostFlag;
            if (c.master) {
              result.master = result.param;
              result.param = param.out(onDevice);
            }
            return result;
          };
          cpu::adamw(args(false));
          flag.upload(&deviceFlag);
          if (grouped) {
            AdamWStepScalars scalars = adamwScalars(args(false));
            table.upload(&scalars);
            auto group = cuda::AdamWGroup::create({args(true)}, {0});
            INFO(group.status().message());
            REQUIRE(group);
            requireRan((*group)->run(table.data(), onDeviceFlag, nullptr));
          } else {
            requireRan(cuda::adamw(args(true), nullptr));
          }
          flag.download(&deviceFlag);
          REQUIRE(hostFlag == (c.storesNonFinite ? 1u : 0u));
          REQUIRE(deviceFlag == hostFlag);
        }
}

TEST_CASE("cuda kernels reject f64 and i32 storage as invalid input", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  double hostValue = 1.0;
  TensorView f64{&hostValue, DType::F64}, i32{&hostValue, DType::I32},
      f32{&hostValue, DType::F32};
  Status add = cuda::add({.a = f64, .b = f64, .y = f64, .numel = 1}, nullptr);
  INFO(add.message());
  REQUIRE(add.code() == Status::Code::InvalidInput);
  Status norm = cuda::rmsNorm(
      {.x = i32, .w = f32, .y = f32, .rows = 1, .cols = 1, .groupSize = 1},
      nullptr);
  REQUIRE(norm.code() == Status::Code::InvalidInput);
  Status fill = cuda::fill({.out = f64, .numel = 1}, nullptr);
  REQUIRE(fill.code() == Status::Code::InvalidInput);
}
