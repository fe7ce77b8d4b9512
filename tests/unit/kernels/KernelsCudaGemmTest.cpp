//===- KernelsCudaGemmTest.cpp - cuBLASLt GEMMs against the cpu kernels ---===//
//
// The three linear-layer products on odd shapes, f32 and bf16, against
// cpu::matmul*, on random non-zero inputs with the outputs poisoned first.
// Exits 77 (ctest's skip code) on a machine without a device.
//
//===----------------------------------------------------------------------===//

#include "kernels/Matmul.h"
#include "kernels/cuda/DeviceInfo.h"
#include "kernels/cuda/Gemm.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>

using namespace sharc;
using namespace sharc::kernels;
using sharc::kernels::test::maxRelativeError;
using sharc::kernels::test::randomValues;
using sharc::kernels::test::Tensor;

namespace {

/// A device copy of a host Tensor, freed on scope exit.
class DeviceTensor {
public:
  DeviceTensor(const Tensor &host, DType dtype)
      : dtype_(dtype), numel_(host.numel()) {
    size_t bytes = static_cast<size_t>(numel_ * dtypeSize(dtype));
    REQUIRE(cudaMalloc(&data_, bytes) == cudaSuccess);
    REQUIRE(cudaMemcpy(data_, host.cview().data, bytes,
                       cudaMemcpyHostToDevice) == cudaSuccess);
  }
  DeviceTensor(int64_t numel, DType dtype) : dtype_(dtype), numel_(numel) {
    size_t bytes = static_cast<size_t>(numel_ * dtypeSize(dtype));
    REQUIRE(cudaMalloc(&data_, bytes) == cudaSuccess);
    // All-ones bytes are NaN: an element the kernel misses shows.
    REQUIRE(cudaMemset(data_, 0xff, bytes) == cudaSuccess);
  }
  ~DeviceTensor() { cudaFree(data_); }
  TensorView view() { return {data_, dtype_}; }
  ConstTensorView cview() const { return {data_, dtype_}; }
  std::vector<double> values() const {
    Tensor host(dtype_, numel_);
    REQUIRE(cudaMemcpy(host.view().data, data_,
                       static_cast<size_t>(numel_ * dtypeSize(dtype_)),
                       cudaMemcpyDeviceToHost) == cudaSuccess);
    return host.values();
  }

private:
  void *data_ = nullptr;
  DType dtype_;
  int64_t numel_;
};

bool allFinite(const std::vector<double> &values) {
  for (double value : values)
    if (!std::isfinite(value))
      return false;
  return true;
}

} // namespace

TEST_CASE("cuBLASLt GEMMs match the cpu products", "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  auto gemm = cuda::Gemm::create(32 << 20);
  REQUIRE(gemm.isOk());
  std::mt19937 rng(7);
  struct Shape {
    int64_t m, n, k;
  };
  for (Shape s : {Shape{37, 129, 65}, Shape{256, 96, 768}, Shape{1, 7, 3}})
    for (DType dtype : {DType::F32, DType::BF16}) {
      INFO("m=" << s.m << " n=" << s.n << " k=" << s.k << " "
                << dtypeName(dtype));
      // fp32 accumulation either way: f32 tight (no TF32), bf16 by its
      // output rounding (8 significant bits).
      double bound = dtype == DType::F32 ? 1e-5 : 1e-2;
      Tensor x(dtype, randomValues(s.m * s.k, rng));
      Tensor w(dtype, randomValues(s.n * s.k, rng));
      Tensor dy(dtype, randomValues(s.m * s.n, rng));
      DeviceTensor dx_(x, dtype), dw_(w, dtype), ddy(dy, dtype);

      Tensor y(dtype, s.m * s.n);
      cpu::matmul({.x = x.cview(),
                   .w = w.cview(),
                   .y = y.view(),
                   .m = s.m,
                   .n = s.n,
                   .k = s.k});
      DeviceTensor yOut(s.m * s.n, dtype);
      REQUIRE((*gemm)
                  ->matmul({.x = dx_.cview(),
                            .w = dw_.cview(),
                            .y = yOut.view(),
                            .m = s.m,
                            .n = s.n,
                            .k = s.k},
                           nullptr)
                  .isOk());
      std::vector<double> got = yOut.values();
      REQUIRE(allFinite(got));
      CHECK(maxRelativeError(got, y.values()) <= bound);

      Tensor dx(dtype, s.m * s.k);
      cpu::matmulDgrad({.dy = dy.cview(),
                        .w = w.cview(),
                        .dx = dx.view(),
                        .m = s.m,
                        .n = s.n,
                        .k = s.k});
      DeviceTensor dxOut(s.m * s.k, dtype);
      REQUIRE((*gemm)
                  ->matmulDgrad({.dy = ddy.cview(),
                                 .w = dw_.cview(),
                                 .dx = dxOut.view(),
                                 .m = s.m,
                                 .n = s.n,
                                 .k = s.k},
                                nullptr)
                  .isOk());
      got = dxOut.values();
      REQUIRE(allFinite(got));
      CHECK(maxRelativeError(got, dx.values()) <= bound);

      Tensor dw(dtype, s.n * s.k);
      cpu::matmulWgrad({.dy = dy.cview(),
                        .x = x.cview(),
                        .dw = dw.view(),
                        .m = s.m,
                        .n = s.n,
                        .k = s.k});
      DeviceTensor dwOut(s.n * s.k, dtype);
      REQUIRE((*gemm)
                  ->matmulWgrad({.dy = ddy.cview(),
                                 .x = dx_.cview(),
                                 .dw = dwOut.view(),
                                 .m = s.m,
                                 .n = s.n,
                                 .k = s.k},
                                nullptr)
                  .isOk());
      got = dwOut.values();
      REQUIRE(allFinite(got));
      CHECK(maxRelativeError(got, dw.values()) <= bound);
    }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("cuBLASLt GEMMs with an addend match the cpu's fused sums", "[gpu]") {
  // matmul_add and matmul_dgrad_add: C = the addend with beta 1, against
  // the cpu's product plus addend before its one rounding; the addend's
  // buffer stays as it was.
  if (cuda::deviceCount() == 0)
    std::exit(77);
  auto gemm = cuda::Gemm::create(32 << 20);
  REQUIRE(gemm.isOk());
  std::mt19937 rng(11);
  const int64_t m = 96, n = 160, k = 72;
  for (DType dtype : {DType::F32, DType::BF16}) {
    INFO(dtypeName(dtype));
    double bound = dtype == DType::F32 ? 1e-5 : 1e-2;
    Tensor x(dtype, randomValues(m * k, rng));
    Tensor w(dtype, randomValues(n * k, rng));
    Tensor r(dtype, randomValues(m * n, rng));
    Tensor rk(dtype, randomValues(m * k, rng));
    DeviceTensor dX(x, dtype), dW(w, dtype), dR(r, dtype), dRk(rk, dtype);

    Tensor y(dtype, m * n);
    cpu::matmul({.x = x.cview(),
                 .w = w.cview(),
                 .y = y.view(),
                 .m = m,
                 .n = n,
                 .k = k,
                 .addend = r.cview()});
    DeviceTensor yOut(m * n, dtype);
    REQUIRE((*gemm)
                ->matmul({.x = dX.cview(),
                          .w = dW.cview(),
                          .y = yOut.view(),
                          .m = m,
                          .n = n,
                          .k = k,
                          .addend = dR.cview()},
                         nullptr)
                .isOk());
    std::vector<double> got = yOut.values();
    REQUIRE(allFinite(got));
    CHECK(maxRelativeError(got, y.values()) <= bound);
    CHECK(dR.values() == r.values());

    // dgrad: dy is [m, n] (x's role), the addend [m, k].
    Tensor dx(dtype, m * k);
    cpu::matmulDgrad({.dy = r.cview(),
                      .w = w.cview(),
                      .dx = dx.view(),
                      .m = m,
                      .n = n,
                      .k = k,
                      .addend = rk.cview()});
    DeviceTensor dxOut(m * k, dtype);
    REQUIRE((*gemm)
                ->matmulDgrad({.dy = dR.cview(),
                               .w = dW.cview(),
                               .dx = dxOut.view(),
                               .m = m,
                               .n = n,
                               .k = k,
                               .addend = dRk.cview()},
                              nullptr)
                .isOk());
    got = dxOut.values();
    REQUIRE(allFinite(got));
    CHECK(maxRelativeError(got, dx.values()) <= bound);
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("cuBLASLt refuses mixed float types", "[gpu]") {
  if (cuda::deviceCount() == 0)
    std::exit(77);
  auto gemm = cuda::Gemm::create(0);
  REQUIRE(gemm.isOk());
  Status status = (*gemm)->matmul({.x = {nullptr, DType::F32},
                                   .w = {nullptr, DType::BF16},
                                   .y = {nullptr, DType::F32},
                                   .m = 4,
                                   .n = 4,
                                   .k = 4},
                                  nullptr);
  REQUIRE(status.code() == Status::Code::InvalidInput);
  REQUIRE(status.message().find("one float type") != std::string::npos);
}
