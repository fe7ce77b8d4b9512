//===- Gemm.cpp - the linear layer GEMMs on cuBLASLt ----------------------===//
//
// Row-major X[m,k] is column-major X^T with leading dimension k, so every
// row-major product is computed transposed: for y = x w^T (w [n,k]),
// y^T[n,m] = w[n,k] x^T, i.e. column-major C(n x m) = op_T(w) op_N(x).
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Gemm.h"

#include "kernels/cuda/Launch.h"

#include <cublasLt.h>

#include <string>

namespace sharc::kernels::cuda {

namespace {

/// cublasGetStatusName lives in libcublas, which sharc does not link.
const char *statusName(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "not initialized";
  case CUBLAS_STATUS_ALLOC_FAILED:
    return "allocation failed";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "invalid value";
  case CUBLAS_STATUS_ARCH_MISMATCH:
    return "architecture mismatch";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "execution failed";
  case CUBLAS_STATUS_INTERNAL_ERROR:
    return "internal error";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "not supported";
  default:
    return "error";
  }
}

Status cublasStatus(cublasStatus_t status, const char *call) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return Status::runtimeError(std::string("cuBLASLt: ") + call + ": " +
                              statusName(status) + " (status " +
                              std::to_string(static_cast<int>(status)) + ")");
}

#define SHARC_CUBLAS(call)                                                     \
  do {                                                                         \
    ::sharc::Status sharcCublasStatus = cublasStatus((call), #call);           \
    if (!sharcCublasStatus.isOk())                                             \
      return sharcCublasStatus;                                                \
  } while (0)

Result<cudaDataType_t> cudaType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return CUDA_R_32F;
  case DType::BF16:
    return CUDA_R_16BF;
  default:
    return Status::invalidInput(std::string("cuBLASLt GEMMs take f32 or "
                                            "bf16 operands, got ") +
                                dtypeName(dtype));
  }
}

Status sameType(DType a, DType b, DType c, DType *common) {
  if (a != b || a != c)
    return Status::invalidInput(
        std::string("cuBLASLt needs one float type for every operand, got ") +
        dtypeName(a) + ", " + dtypeName(b) + " and " + dtypeName(c));
  *common = a;
  return Status::ok();
}

cublasLtHandle_t asHandle(void *handle) {
  return static_cast<cublasLtHandle_t>(handle);
}

} // namespace

struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
  }
};

Result<std::unique_ptr<Gemm>> Gemm::create(int64_t workspaceBytes) {
  std::unique_ptr<Gemm> gemm(new Gemm());
  cublasLtHandle_t handle = nullptr;
  SHARC_CUBLAS(cublasLtCreate(&handle));
  gemm->handle_ = handle;
  if (workspaceBytes > 0)
    SHARC_CUDA(
        cudaMalloc(&gemm->workspace_, static_cast<size_t>(workspaceBytes)));
  gemm->workspaceBytes_ = workspaceBytes;
  return gemm;
}

Gemm::~Gemm() {
  plans_.clear();
  if (workspace_)
    cudaFree(workspace_);
  if (handle_)
    cublasLtDestroy(asHandle(handle_));
}

Result<const Gemm::Plan *> Gemm::planFor(const Product &p) {
  Key key{p.transA, p.transB, p.m,
          p.n,      p.k,      p.lda,
          p.ldb,    p.ldc,    static_cast<int>(p.dtype)};
  auto it = plans_.find(key);
  if (it != plans_.end())
    return static_cast<const Plan *>(it->second.get());
  auto type = cudaType(p.dtype);
  if (!type)
    return type.status();
  auto plan = std::make_unique<Plan>();
  SHARC_CUBLAS(
      cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t opA = p.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = p.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  SHARC_CUBLAS(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA)));
  SHARC_CUBLAS(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB)));
  // Stored shapes: op(A) is m x k, so A is k x m when transposed.
  SHARC_CUBLAS(cublasLtMatrixLayoutCreate(&plan->a, *type, p.transA ? p.k : p.m,
                                          p.transA ? p.m : p.k, p.lda));
  SHARC_CUBLAS(cublasLtMatrixLayoutCreate(&plan->b, *type, p.transB ? p.n : p.k,
                                          p.transB ? p.k : p.n, p.ldb));
  SHARC_CUBLAS(cublasLtMatrixLayoutCreate(&plan->c, *type, p.m, p.n, p.ldc));
  cublasLtMatmulPreference_t preference = nullptr;
  SHARC_CUBLAS(cublasLtMatmulPreferenceCreate(&preference));
  uint64_t maxWorkspace = static_cast<uint64_t>(workspaceBytes_);
  cublasStatus_t setStatus = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &maxWorkspace,
      sizeof(maxWorkspace));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t heuristic = CUBLAS_STATUS_SUCCESS;
  if (setStatus == CUBLAS_STATUS_SUCCESS)
    heuristic = cublasLtMatmulAlgoGetHeuristic(
        asHandle(handle_), plan->desc, plan->a, plan->b, plan->c, plan->c,
        preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  SHARC_CUBLAS(setStatus);
  SHARC_CUBLAS(heuristic);
  if (found == 0)
    return Status::runtimeError(
        "cuBLASLt has no algorithm for a " + std::string(dtypeName(p.dtype)) +
        " GEMM of m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) +
        " k=" + std::to_string(p.k));
  plan->algo = result.algo;
  const Plan *made = plan.get();
  plans_.emplace(key, std::move(plan));
  return made;
}

Status Gemm::run(const Product &product, const void *a, const void *b, void *c,
                 DeviceStream stream, const void *addend) {
  if (product.m == 0 || product.n == 0)
    return Status::ok();
  auto plan = planFor(product);
  if (!plan)
    return plan.status();
  // D = AB + beta C: C is the addend (same layout as D) with beta 1, or D
  // itself with beta 0.
  float one = 1.0f, zero = 0.0f;
  SHARC_CUBLAS(cublasLtMatmul(asHandle(handle_), (*plan)->desc, &one, a,
                              (*plan)->a, b, (*plan)->b, addend ? &one : &zero,
                              addend ? addend : c, (*plan)->c, c, (*plan)->c,
                              &(*plan)->algo, workspace_,
                              static_cast<size_t>(workspaceBytes_), stream));
  return Status::ok();
}

// y^T (n x m) = op_T(w: k x n) op_N(x^T: k x m)
Result<Gemm::Product> Gemm::productOf(const MatmulArgs &args) {
  DType dtype;
  SHARC_TRY(sameType(args.x.dtype, args.w.dtype, args.y.dtype, &dtype));
  return Product{true,   false,  args.n, args.m, args.k,
                 args.k, args.k, args.n, dtype};
}

// dx^T (k x m) = op_N(w^T: k x n) op_N(dy^T: n x m)
Result<Gemm::Product> Gemm::productOf(const MatmulDgradArgs &args) {
  DType dtype;
  SHARC_TRY(sameType(args.dy.dtype, args.w.dtype, args.dx.dtype, &dtype));
  return Product{false,  false,  args.k, args.m, args.n,
                 args.k, args.n, args.k, dtype};
}

// dw^T (k x n) = op_N(x^T: k x m) op_T(dy^T: n x m)
Result<Gemm::Product> Gemm::productOf(const MatmulWgradArgs &args) {
  DType dtype;
  SHARC_TRY(sameType(args.dy.dtype, args.x.dtype, args.dw.dtype, &dtype));
  return Product{false,  true,   args.k, args.n, args.m,
                 args.k, args.n, args.k, dtype};
}

Status Gemm::matmul(const MatmulArgs &args, DeviceStream stream) {
  auto product = productOf(args);
  if (!product)
    return product.status();
  if (args.addend.data && args.addend.dtype != args.y.dtype)
    return Status::invalidInput("matmul's addend must have y's dtype");
  return run(*product, args.w.data, args.x.data, args.y.data, stream,
             args.addend.data);
}

Status Gemm::matmulDgrad(const MatmulDgradArgs &args, DeviceStream stream) {
  auto product = productOf(args);
  if (!product)
    return product.status();
  if (args.addend.data && args.addend.dtype != args.dx.dtype)
    return Status::invalidInput("matmul_dgrad's addend must have dx's dtype");
  return run(*product, args.w.data, args.dy.data, args.dx.data, stream,
             args.addend.data);
}

Status Gemm::matmulWgrad(const MatmulWgradArgs &args, DeviceStream stream) {
  auto product = productOf(args);
  if (!product)
    return product.status();
  return run(*product, args.x.data, args.dy.data, args.dw.data, stream);
}

Status Gemm::prepare(const MatmulArgs &args) { return prepareFor(args); }

Status Gemm::prepare(const MatmulDgradArgs &args) { return prepareFor(args); }

Status Gemm::prepare(const MatmulWgradArgs &args) { return prepareFor(args); }

} // namespace sharc::kernels::cuda
