//===- Gemm.h - the linear layer GEMMs on cuBLASLt --------------*- C++ -*-===//
// defines: Gemm (cuda::)
//
// kernels/Matmul.h's three products (forward, dgrad, wgrad) with row-major
// operands, each one cuBLASLt matmul with fp32 accumulation
// (CUBLAS_COMPUTE_32F, so f32 plans run true fp32, never TF32) and all
// operands of one float type. A Gemm belongs to one stream: its workspace
// is used by one matmul at a time. The descriptors and the heuristic's
// algorithm are made once per (product, shape, dtype) and cached.
//
//   auto gemm = Gemm::create(/*workspaceBytes=*/32 << 20);
//   SHARC_TRY((*gemm)->matmul(args, stream));
#pragma once

#include "kernels/Matmul.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

namespace sharc::kernels::cuda {

class Gemm {
public:
  /// On the current device; allocates the workspace.
  static Result<std::unique_ptr<Gemm>> create(int64_t workspaceBytes);
  ~Gemm();
  Gemm(const Gemm &) = delete;
  Gemm &operator=(const Gemm &) = delete;

  Status matmul(const MatmulArgs &args, DeviceStream stream);
  Status matmulDgrad(const MatmulDgradArgs &args, DeviceStream stream);
  Status matmulWgrad(const MatmulWgradArgs &args, DeviceStream stream);
  /// Makes the product's descriptors and picks its algorithm now (at
  /// set-up) instead of at its first launch; only sizes and dtypes are read.
  Status prepare(const MatmulArgs &args);
  Status prepare(const MatmulDgradArgs &args);
  Status prepare(const MatmulWgradArgs &args);
  int64_t workspaceBytes() const { return workspaceBytes_; }

  struct Plan; ///< descriptors and algorithm of one cached product

private:
  Gemm() = default;
  /// One column-major product C[m,n] = op(A)[m,k] op(B)[k,n] as cuBLASLt
  /// sees it; the row-major callers map onto it.
  struct Product {
    bool transA, transB;
    int64_t m, n, k, lda, ldb, ldc;
    DType dtype;
  };
  static Result<Product> productOf(const MatmulArgs &args);
  static Result<Product> productOf(const MatmulDgradArgs &args);
  static Result<Product> productOf(const MatmulWgradArgs &args);
  /// The cached descriptors and algorithm of `product`, made on first use.
  Result<const Plan *> planFor(const Product &product);
  /// c = a b (+ addend, laid out as c, when given).
  Status run(const Product &product, const void *a, const void *b, void *c,
             DeviceStream stream, const void *addend = nullptr);
  /// prepare() of any of the three products: an empty one needs no plan.
  template <typename Args> Status prepareFor(const Args &args) {
    auto product = productOf(args);
    if (!product)
      return product.status();
    if (product->m == 0 || product->n == 0)
      return Status::ok();
    return planFor(*product).status();
  }

  void *handle_ = nullptr; ///< cublasLtHandle_t
  void *workspace_ = nullptr;
  int64_t workspaceBytes_ = 0;
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int>;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

} // namespace sharc::kernels::cuda
