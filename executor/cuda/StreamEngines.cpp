//===- StreamEngines.cpp - what a CUDA stream launches through -----------===//

#include "executor/cuda/StreamEngines.h"

#include "kernels/cuda/Gemm.h"
#include "kernels/cuda/Launch.h"
#if SHARC_WITH_CUDNN
#include "kernels/cuda/CudnnAttention.h"
#endif

#include <cstdlib>
#include <string>
#include <string_view>

namespace sharc::exec {

namespace {

class CudaGemmEngine final : public GemmEngine {
public:
  explicit CudaGemmEngine(std::unique_ptr<kernels::cuda::Gemm> gemm)
      : gemm_(std::move(gemm)) {}
  Status matmul(const kernels::MatmulArgs &args,
                kernels::DeviceStream stream) override {
    return gemm_->matmul(args, stream);
  }
  Status matmulDgrad(const kernels::MatmulDgradArgs &args,
                     kernels::DeviceStream stream) override {
    return gemm_->matmulDgrad(args, stream);
  }
  Status matmulWgrad(const kernels::MatmulWgradArgs &args,
                     kernels::DeviceStream stream) override {
    return gemm_->matmulWgrad(args, stream);
  }
  Status prepare(const kernels::MatmulArgs &args) override {
    return gemm_->prepare(args);
  }
  Status prepare(const kernels::MatmulDgradArgs &args) override {
    return gemm_->prepare(args);
  }
  Status prepare(const kernels::MatmulWgradArgs &args) override {
    return gemm_->prepare(args);
  }

private:
  std::unique_ptr<kernels::cuda::Gemm> gemm_;
};

#if SHARC_WITH_CUDNN
class CudnnAttentionEngine final : public AttentionEngine {
public:
  explicit CudnnAttentionEngine(
      std::unique_ptr<kernels::cuda::CudnnAttention> attention)
      : attention_(std::move(attention)) {}
  bool accepts(DType dtype, int64_t headDim) const override {
    return kernels::cuda::CudnnAttention::accepts(dtype, headDim);
  }
  Result<int64_t> prepare(const kernels::AttentionArgs &args) override {
    return attention_->prepare(args);
  }
  Result<int64_t> prepare(const kernels::AttentionGradArgs &args) override {
    return attention_->prepare(args);
  }
  Status run(const kernels::AttentionArgs &args, void *workspace) override {
    return attention_->run(args, workspace);
  }
  Status run(const kernels::AttentionGradArgs &args, void *workspace) override {
    return attention_->run(args, workspace);
  }
  bool accepts(const kernels::DecodeAttentionArgs &args) const override {
    return kernels::cuda::CudnnAttention::accepts(args);
  }
  Result<int64_t> prepare(const kernels::DecodeAttentionArgs &args) override {
    return attention_->prepare(args);
  }
  Status run(const kernels::DecodeAttentionArgs &args, void *scratch) override {
    return attention_->run(args, scratch);
  }

private:
  std::unique_ptr<kernels::cuda::CudnnAttention> attention_;
};
#endif

} // namespace

Result<std::unique_ptr<GemmEngine>> createGemmEngine(int64_t workspaceBytes) {
  auto gemm = kernels::cuda::Gemm::create(workspaceBytes);
  if (!gemm)
    return gemm.status();
  return std::unique_ptr<GemmEngine>(
      std::make_unique<CudaGemmEngine>(std::move(*gemm)));
}

/// SHARC_ATTENTION=sharc runs sharc's own attention kernels even where
/// cuDNN's would run (to compare the two); unset or "cudnn" prefers cuDNN.
/// SHARC_CUDNN_DETERMINISTIC=1 picks cuDNN's bit-reproducible backward.
Result<std::unique_ptr<AttentionEngine>>
createAttentionEngine(cudaStream_t stream) {
#if SHARC_WITH_CUDNN
  const char *choice = std::getenv("SHARC_ATTENTION");
  if (choice && std::string_view(choice) == "sharc")
    return std::unique_ptr<AttentionEngine>();
  if (choice && std::string_view(choice) != "cudnn")
    return Status::invalidInput(std::string("SHARC_ATTENTION=") + choice +
                                ": expected cudnn or sharc");
  const char *deterministic = std::getenv("SHARC_CUDNN_DETERMINISTIC");
  auto attention = kernels::cuda::CudnnAttention::create(
      stream, deterministic && std::string_view(deterministic) == "1");
  if (!attention)
    return attention.status();
  return std::unique_ptr<AttentionEngine>(
      std::make_unique<CudnnAttentionEngine>(std::move(*attention)));
#else
  return std::unique_ptr<AttentionEngine>();
#endif
}

/// Each plan stream's CUDA priority. SHARC_STREAM_PRIORITY=comm gives the
/// communication stream (1) the highest, so that its NCCL kernels take SMs
/// as soon as their data is ready instead of queueing behind GEMMs that
/// fill the device; `compute` favours stream 0 instead; `none` (the
/// default until a two-GPU measurement says otherwise) leaves both equal.
Result<std::vector<int>> streamPriorities(int64_t numStreams) {
  int least = 0, greatest = 0;
  SHARC_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  std::vector<int> priorities(static_cast<size_t>(numStreams), least);
  const char *choice = std::getenv("SHARC_STREAM_PRIORITY");
  std::string_view favoured = choice ? choice : "none";
  if (favoured == "comm" && numStreams > 1)
    priorities[1] = greatest;
  else if (favoured == "compute" && numStreams > 0)
    priorities[0] = greatest;
  else if (favoured != "comm" && favoured != "compute" && favoured != "none")
    return Status::invalidInput(
        "SHARC_STREAM_PRIORITY takes comm, compute or none, not '" +
        std::string(favoured) + "'");
  return priorities;
}

} // namespace sharc::exec
