//===- CudaAttentionChecks.h - cuda attention against the cpu ---*- C++ -*-===//
// defines: DeviceBuffer, Shape, kShapes, kBlockShapes, kBalancedShapes,
//          kRingShapes, checkForward, checkBackward, withColumnV
//          (test::cuda_attention)
//
// The checks KernelsCudaAttentionTest (sharc's kernels) and
// KernelsCudnnAttentionTest (cuDNN's SDPA) share: a launch against
// cpu::attention and cpu::attentionGrad on the same stored inputs, for
// shapes that are not tile multiples (tiles are 64 and 32 rows), head dims
// that fill or pad the 64/96/128 buckets, context parallelism's query
// blocks, the balanced split's two runs and ring attention's blocks. Outputs
// are filled with 0xFF bytes (NaN in f32 and bf16) before each launch, so an
// element the kernel never writes fails the NaN check.
#pragma once

#include "kernels/Attention.h"
#include "tests/unit/kernels/AttentionTestShapes.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace sharc::kernels::test::cuda_attention {

/// One device allocation, freed on every path out of the test.
class DeviceBuffer {
public:
  explicit DeviceBuffer(int64_t numBytes) : numBytes_(numBytes) {
    REQUIRE(cudaMalloc(&data_, numBytes) == cudaSuccess);
  }
  DeviceBuffer(const Tensor &host, DType dtype)
      : DeviceBuffer(host.numel() * dtypeSize(dtype)) {
    REQUIRE(cudaMemcpy(data_, host.cview().data, numBytes_,
                       cudaMemcpyHostToDevice) == cudaSuccess);
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { cudaFree(data_); }

  void *data() const { return data_; }
  /// 0xFF bytes are a NaN in every float type.
  void poison() { REQUIRE(cudaMemset(data_, 0xFF, numBytes_) == cudaSuccess); }
  void download(void *host) const {
    REQUIRE(cudaMemcpy(host, data_, numBytes_, cudaMemcpyDeviceToHost) ==
            cudaSuccess);
  }

private:
  void *data_ = nullptr;
  int64_t numBytes_;
};

struct Shape {
  int64_t seqLen, batch, numHeads, numKvHeads, headDim;
  /// A query block at queryStart against kvSeqLen keys (0: square); the
  /// balanced split's second run of queries from querySecondRow on.
  int64_t kvSeqLen = 0, queryStart = 0;
  int64_t querySecondRow = 0, querySecondStart = 0;
  /// The keys' positions (ring attention's blocks; all-gather: from 0).
  int64_t keyStart = 0, keySecondRow = 0, keySecondStart = 0;
  int64_t keys() const { return kvSeqLen > 0 ? kvSeqLen : seqLen; }
  int64_t qNumel() const { return seqLen * batch * numHeads * headDim; }
  int64_t kvNumel() const { return keys() * batch * numKvHeads * headDim; }
  int64_t lseNumel() const { return batch * numHeads * seqLen; }
  std::string name() const {
    return "seqLen " + std::to_string(seqLen) + ", batch " +
           std::to_string(batch) + ", heads " + std::to_string(numHeads) + "/" +
           std::to_string(numKvHeads) + ", headDim " + std::to_string(headDim) +
           ", keys " + std::to_string(keys()) + " from query " +
           std::to_string(queryStart) + ", from row " +
           std::to_string(querySecondRow) + " at " +
           std::to_string(querySecondStart) + ", keys at " +
           std::to_string(keyStart) + " and from row " +
           std::to_string(keySecondRow) + " at " +
           std::to_string(keySecondStart);
  }
};

// 37 fits in one tile, 130 spans three forward tiles and five dk/dv query
// tiles, both with a ragged end; 40 pads the 64 bucket.
inline const std::vector<Shape> kShapes = {
    {37, 3, 4, 2, 64},  {130, 3, 3, 1, 96}, {130, 3, 4, 2, 128},
    {37, 3, 3, 1, 128}, {130, 3, 4, 2, 64}, {130, 2, 4, 2, 40}};

// Query blocks of context parallelism's K/V all-gather: blocks that start
// inside a tile (60, 99), on a tile edge (192) and at 0, ending inside the
// last key tile or on its edge.
inline const std::vector<Shape> kBlockShapes = {{37, 3, 4, 2, 64, 130, 60},
                                                {33, 2, 3, 1, 128, 132, 99},
                                                {64, 2, 4, 2, 40, 256, 192},
                                                {65, 3, 4, 2, 96, 130, 0},
                                                {32, 2, 4, 4, 64, 128, 96}};

// The balanced split's two query runs (kernels/SequencePositions.h): rank
// 1 of 4 (chunks of 33: the second run starts inside a tile), rank 0 of 2
// (chunks of 64, on a tile edge), rank 1 of 2 (adjacent chunks 1 and 2)
// and rank 0 of 3 (chunks 0 and 5 of 16 rows).
inline const std::vector<Shape> kBalancedShapes = {
    {66, 2, 4, 2, 64, 264, 33, 33, 198},
    {128, 2, 4, 2, 128, 256, 0, 64, 192},
    {40, 3, 3, 1, 96, 80, 20, 20, 40},
    {32, 2, 4, 4, 40, 96, 0, 16, 80}};

// Ring attention's blocks (kernels/AttentionRuns.h): an earlier block on
// the contiguous split (every query sees every key: no mask), the own
// block at a later position (causal), and under the balanced split a
// later block (the first chunk sees no key, the second all: an unmasked
// call on its rows, packed lse rows), an earlier one (both chunks see the
// first key chunk alone) and the own block (one causal call).
inline const std::vector<Shape> kRingShapes = {
    {32, 2, 4, 2, 64, 32, 64, 0, 0, 32},
    {37, 3, 4, 2, 40, 37, 111, 0, 0, 111},
    {66, 2, 4, 2, 64, 66, 0, 33, 99, 33, 33, 66},
    {32, 3, 3, 1, 96, 32, 16, 16, 32, 0, 16, 48},
    {40, 2, 4, 4, 128, 40, 20, 20, 80, 20, 20, 80}};

inline double tolerance(DType dtype) {
  return dtype == DType::F32 ? 1e-4 : 2e-2;
}

inline Tensor download(const DeviceBuffer &buffer, DType dtype, int64_t numel) {
  Tensor host(dtype, numel);
  buffer.download(host.view().data);
  return host;
}

inline std::vector<double> download(const DeviceBuffer &lse, int64_t numel) {
  std::vector<float> values(numel);
  lse.download(values.data());
  return {values.begin(), values.end()};
}

inline bool hasNaN(const std::vector<double> &values) {
  for (double value : values)
    if (std::isnan(value))
      return true;
  return false;
}

/// Checks `actual` for NaN and against `expected` within the dtype's bound.
inline void requireClose(const char *what, const std::vector<double> &actual,
                         const std::vector<double> &expected, DType dtype) {
  INFO(what);
  REQUIRE_FALSE(hasNaN(actual));
  CHECK(maxRelativeError(actual, expected) <= tolerance(dtype));
}

struct Inputs {
  Tensor q, k, v;
};

inline Inputs randomInputs(const Shape &shape, DType dtype, std::mt19937 &rng) {
  // Scores of order one: softmax is neither uniform nor one-hot.
  return {Tensor(dtype, randomValues(shape.qNumel(), rng, 2.0)),
          Tensor(dtype, randomValues(shape.kvNumel(), rng, 2.0)),
          Tensor(dtype, randomValues(shape.kvNumel(), rng))};
}

/// `args` with `shape`'s sizes and query positions (the cpu tests' `shaped`,
/// keys from position 0).
template <typename Args> Args sized(Args args, const Shape &shape) {
  return test::shaped(
      args,
      test::AttentionShape{shape.seqLen, shape.batch, shape.numHeads,
                           shape.numKvHeads, shape.headDim},
      shape.kvSeqLen,
      RowPositions{shape.queryStart, shape.querySecondRow,
                   shape.querySecondStart},
      RowPositions{shape.keyStart, shape.keySecondRow, shape.keySecondStart});
}

struct CpuForward {
  Tensor out;
  std::vector<float> lse;
};

inline CpuForward cpuForward(const Shape &shape, DType dtype,
                             const Inputs &in) {
  CpuForward result{Tensor(dtype, shape.qNumel()),
                    std::vector<float>(shape.lseNumel())};
  cpu::attention(sized(AttentionArgs{.q = in.q.cview(),
                                     .k = in.k.cview(),
                                     .v = in.v.cview(),
                                     .out = result.out.view(),
                                     .lse = result.lse.data()},
                       shape));
  return result;
}

using ForwardFn = std::function<Status(const AttentionArgs &)>;
using BackwardFn = std::function<Status(const AttentionGradArgs &)>;

/// `forward` against cpu::attention on every shape, in each of `dtypes`.
inline void checkForward(const ForwardFn &forward, std::vector<DType> dtypes,
                         const std::vector<Shape> &shapes = kShapes) {
  std::mt19937 rng(61);
  for (const Shape &shape : shapes)
    for (DType dtype : dtypes) {
      INFO(shape.name() << ", " << dtypeName(dtype));
      Inputs in = randomInputs(shape, dtype, rng);
      CpuForward expected = cpuForward(shape, dtype, in);

      DeviceBuffer q(in.q, dtype), k(in.k, dtype), v(in.v, dtype);
      DeviceBuffer out(shape.qNumel() * dtypeSize(dtype));
      DeviceBuffer lse(shape.lseNumel() * int64_t(sizeof(float)));
      out.poison();
      lse.poison();
      Status status =
          forward(sized(AttentionArgs{.q = {q.data(), dtype},
                                      .k = {k.data(), dtype},
                                      .v = {v.data(), dtype},
                                      .out = {out.data(), dtype},
                                      .lse = static_cast<float *>(lse.data())},
                        shape));
      INFO(status.message());
      REQUIRE(status.isOk());
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);

      requireClose("out", download(out, dtype, shape.qNumel()).values(),
                   expected.out.values(), dtype);
      requireClose("lse", download(lse, shape.lseNumel()),
                   {expected.lse.begin(), expected.lse.end()}, dtype);
    }
}

/// `backward` against cpu::attentionGrad on every shape, in each of
/// `dtypes`, both reading the cpu forward's out and lse.
inline void checkBackward(const BackwardFn &backward, std::vector<DType> dtypes,
                          const std::vector<Shape> &shapes = kShapes) {
  std::mt19937 rng(62);
  for (const Shape &shape : shapes)
    for (DType dtype : dtypes) {
      INFO(shape.name() << ", " << dtypeName(dtype));
      Inputs in = randomInputs(shape, dtype, rng);
      // Both backward passes read the cpu forward's out and lse.
      CpuForward forward = cpuForward(shape, dtype, in);
      Tensor dout(dtype, randomValues(shape.qNumel(), rng));
      Tensor expectDq(dtype, shape.qNumel());
      Tensor expectDk(dtype, shape.kvNumel()), expectDv(dtype, shape.kvNumel());
      cpu::attentionGrad(sized(AttentionGradArgs{.q = in.q.cview(),
                                                 .k = in.k.cview(),
                                                 .v = in.v.cview(),
                                                 .out = forward.out.cview(),
                                                 .dout = dout.cview(),
                                                 .lse = forward.lse.data(),
                                                 .dq = expectDq.view(),
                                                 .dk = expectDk.view(),
                                                 .dv = expectDv.view()},
                               shape));

      DeviceBuffer q(in.q, dtype), k(in.k, dtype), v(in.v, dtype);
      DeviceBuffer out(forward.out, dtype), dOut(dout, dtype);
      DeviceBuffer lse(shape.lseNumel() * int64_t(sizeof(float)));
      REQUIRE(cudaMemcpy(lse.data(), forward.lse.data(),
                         forward.lse.size() * sizeof(float),
                         cudaMemcpyHostToDevice) == cudaSuccess);
      DeviceBuffer dq(shape.qNumel() * dtypeSize(dtype));
      DeviceBuffer dk(shape.kvNumel() * dtypeSize(dtype));
      DeviceBuffer dv(shape.kvNumel() * dtypeSize(dtype));
      dq.poison();
      dk.poison();
      dv.poison();
      Status status = backward(
          sized(AttentionGradArgs{.q = {q.data(), dtype},
                                  .k = {k.data(), dtype},
                                  .v = {v.data(), dtype},
                                  .out = {out.data(), dtype},
                                  .dout = {dOut.data(), dtype},
                                  .lse = static_cast<const float *>(lse.data()),
                                  .dq = {dq.data(), dtype},
                                  .dk = {dk.data(), dtype},
                                  .dv = {dv.data(), dtype}},
                shape));
      INFO(status.message());
      REQUIRE(status.isOk());
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);

      requireClose("dq", download(dq, dtype, shape.qNumel()).values(),
                   expectDq.values(), dtype);
      requireClose("dk", download(dk, dtype, shape.kvNumel()).values(),
                   expectDk.values(), dtype);
      requireClose("dv", download(dv, dtype, shape.kvNumel()).values(),
                   expectDv.values(), dtype);
    }
}

/// Columns [offset, offset + width) of rows `pitch` wide on the device: v
/// (or dv) as the fused q/k/v projection's output holds it, the q and k
/// columns before it and one spare vector after it poisoned.
struct DeviceColumns {
  int64_t rows, width, offset, pitch;
  DType dtype;
  DeviceBuffer wide;
  DeviceColumns(const AttentionArgs &args, int64_t rows)
      : DeviceColumns(rows, args.numKvHeads * args.headDim,
                      args.numHeads * args.headDim, args.v.dtype) {}
  DeviceColumns(int64_t rows, int64_t width, int64_t before, DType dtype)
      : rows(rows), width(width), offset(before + width),
        pitch(before + 2 * width + 8), dtype(dtype),
        wide(rows * pitch * dtypeSize(dtype)) {
    wide.poison();
  }
  void *at() const {
    return static_cast<char *>(wide.data()) + offset * dtypeSize(dtype);
  }
  /// Moves packed rows in (toColumns) or out.
  void copy(const void *packed, void *out, bool toColumns) const {
    size_t size = dtypeSize(dtype), rowBytes = width * size;
    cudaError_t error =
        toColumns ? cudaMemcpy2D(at(), pitch * size, packed, rowBytes, rowBytes,
                                 rows, cudaMemcpyDeviceToDevice)
                  : cudaMemcpy2D(out, rowBytes, at(), pitch * size, rowBytes,
                                 rows, cudaMemcpyDeviceToDevice);
    REQUIRE(error == cudaSuccess);
  }
  /// Every byte outside the columns is still the poison.
  void requireUntouchedOutside() const {
    size_t size = dtypeSize(dtype);
    std::vector<unsigned char> bytes(rows * pitch * size);
    wide.download(bytes.data());
    for (int64_t i = 0; i < rows * pitch; ++i) {
      int64_t column = i % pitch;
      if (column >= offset && column < offset + width)
        continue;
      for (size_t b = 0; b < size; ++b)
        REQUIRE(bytes[i * size + b] == 0xFF);
    }
  }
};

/// `forward` with v read from columns of wider rows (vPitch).
inline ForwardFn withColumnV(ForwardFn forward) {
  return [forward](const AttentionArgs &args) {
    DeviceColumns v(args, args.keys() * args.batch);
    v.copy(args.v.data, nullptr, true);
    AttentionArgs strided = args;
    strided.v = {v.at(), args.v.dtype};
    strided.vPitch = v.pitch;
    Status status = forward(strided);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess); // before v is freed
    return status;
  };
}

/// `backward` with v read from and dv written to columns of wider rows,
/// dv then moved to the packed tensor the check reads.
inline BackwardFn withColumnV(BackwardFn backward) {
  return [backward](const AttentionGradArgs &args) {
    int64_t rows = args.keys() * args.batch;
    int64_t width = args.numKvHeads * args.headDim;
    int64_t before = args.numHeads * args.headDim;
    DeviceColumns v(rows, width, before, args.v.dtype);
    DeviceColumns dv(rows, width, before, args.dv.dtype);
    v.copy(args.v.data, nullptr, true);
    AttentionGradArgs strided = args;
    strided.v = {v.at(), args.v.dtype};
    strided.vPitch = v.pitch;
    strided.dv = {dv.at(), args.dv.dtype};
    strided.dvPitch = dv.pitch;
    Status status = backward(strided);
    if (status.isOk()) {
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      dv.requireUntouchedOutside();
      dv.copy(nullptr, args.dv.data, false);
    }
    return status;
  };
}

} // namespace sharc::kernels::test::cuda_attention
