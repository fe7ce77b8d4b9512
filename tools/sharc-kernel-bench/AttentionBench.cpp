//===- AttentionBench.cpp - attention TFLOP/s, sharc's kernel and cuDNN ---===//
//
// sharc-attention-bench: times the causal GQA attention forward and backward
// at the benchmark's shapes with CUDA events, for sharc's own kernels
// (kernels/cuda/Attention.cu) and, where built with it, cuDNN's SDPA in both
// backward algorithms. Inputs are random bf16 (never zeros); each timing is
// the mean of --iters launches after --warmup. tests/gpu/attention-peer.py
// measures PyTorch's scaled_dot_product_attention on the same shapes.
//
//   sharc-attention-bench [--warmup N] [--iters N] [--shape S,B,H,KV,D]...
//
// Each --shape (sequence, batch, query heads, KV heads, head dim) replaces
// the default list of the benchmark's shapes.
//
// FLOPs: the forward's two products over the causal half,
// 2 * 2 * B * H * S^2 * D / 2; the backward 2.5x the forward (five products,
// the scores recomputed), the convention FlashAttention's papers use.
//
//===----------------------------------------------------------------------===//

#include "kernels/Attention.h"
#include "kernels/cuda/Launch.h"
#include "planner/plan/DeviceWorkspace.h"
#if SHARC_WITH_CUDNN
#include "kernels/cuda/CudnnAttention.h"
#endif

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace sharc;
using namespace sharc::kernels;

namespace {

struct Shape {
  int64_t seqLen, batch, numHeads, numKvHeads, headDim;
};

void check(const Status &status, const char *what) {
  if (status.isOk())
    return;
  std::fprintf(stderr, "sharc-attention-bench: %s: %s\n", what,
               status.message().c_str());
  std::exit(1);
}

void checkCuda(cudaError_t error, const char *what) {
  check(cuda::cudaStatus(error, what), what);
}

/// `numel` random bf16 values of magnitude about `scale`, on the device.
void *randomDevice(int64_t numel, float scale, std::mt19937 &rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<uint16_t> host(static_cast<size_t>(numel));
  for (uint16_t &value : host)
    value = floatToBf16(normal(rng));
  void *data = nullptr;
  checkCuda(cudaMalloc(&data, host.size() * 2), "cudaMalloc");
  checkCuda(
      cudaMemcpy(data, host.data(), host.size() * 2, cudaMemcpyHostToDevice),
      "cudaMemcpy");
  return data;
}

/// Mean milliseconds of `launch` over `iters` runs after `warmup`.
double timeMs(const std::function<Status()> &launch, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i)
    check(launch(), "warm-up launch");
  cudaEvent_t start, stop;
  checkCuda(cudaEventCreate(&start), "cudaEventCreate");
  checkCuda(cudaEventCreate(&stop), "cudaEventCreate");
  checkCuda(cudaEventRecord(start), "cudaEventRecord");
  for (int i = 0; i < iters; ++i)
    check(launch(), "timed launch");
  checkCuda(cudaEventRecord(stop), "cudaEventRecord");
  checkCuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  checkCuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iters;
}

struct Buffers {
  void *q, *k, *v, *out, *dout, *dq, *dk, *dv;
  float *lse;
};

Buffers allocate(const Shape &s, std::mt19937 &rng) {
  int64_t qNumel = s.seqLen * s.batch * s.numHeads * s.headDim;
  int64_t kvNumel = s.seqLen * s.batch * s.numKvHeads * s.headDim;
  Buffers b{};
  b.q = randomDevice(qNumel, 1.0f, rng);
  b.k = randomDevice(kvNumel, 1.0f, rng);
  b.v = randomDevice(kvNumel, 1.0f, rng);
  b.out = randomDevice(qNumel, 1.0f, rng);
  b.dout = randomDevice(qNumel, 1.0f, rng);
  b.dq = randomDevice(qNumel, 1.0f, rng);
  b.dk = randomDevice(kvNumel, 1.0f, rng);
  b.dv = randomDevice(kvNumel, 1.0f, rng);
  checkCuda(cudaMalloc(reinterpret_cast<void **>(&b.lse),
                       s.batch * s.numHeads * s.seqLen * sizeof(float)),
            "cudaMalloc");
  return b;
}

void release(Buffers &b) {
  for (void *p : {b.q, b.k, b.v, b.out, b.dout, b.dq, b.dk, b.dv,
                  static_cast<void *>(b.lse)})
    cudaFree(p);
}

AttentionArgs forwardArgs(const Shape &s, const Buffers &b) {
  DType bf16 = DType::BF16;
  return {.q = {b.q, bf16},
          .k = {b.k, bf16},
          .v = {b.v, bf16},
          .out = {b.out, bf16},
          .lse = b.lse,
          .seqLen = s.seqLen,
          .batch = s.batch,
          .numHeads = s.numHeads,
          .numKvHeads = s.numKvHeads,
          .headDim = s.headDim};
}

AttentionGradArgs backwardArgs(const Shape &s, const Buffers &b) {
  DType bf16 = DType::BF16;
  return {.q = {b.q, bf16},
          .k = {b.k, bf16},
          .v = {b.v, bf16},
          .out = {b.out, bf16},
          .dout = {b.dout, bf16},
          .lse = b.lse,
          .dq = {b.dq, bf16},
          .dk = {b.dk, bf16},
          .dv = {b.dv, bf16},
          .seqLen = s.seqLen,
          .batch = s.batch,
          .numHeads = s.numHeads,
          .numKvHeads = s.numKvHeads,
          .headDim = s.headDim};
}

void report(const Shape &s, const char *impl, double fwdMs, double bwdMs) {
  double fwdFlops = 2.0 * s.batch * s.numHeads * double(s.seqLen) * s.seqLen *
                    s.headDim; // 4 B H S^2 D over the causal half
  double fwd = fwdFlops / (fwdMs * 1e9),
         both = 3.5 * fwdFlops / ((fwdMs + bwdMs) * 1e9);
  std::printf("S=%-5lld B=%lld H=%lld/%lld D=%-3lld %-22s fwd %7.3f ms %6.1f "
              "TFLOP/s  bwd %7.3f ms  fwd+bwd %6.1f TFLOP/s\n",
              (long long)s.seqLen, (long long)s.batch, (long long)s.numHeads,
              (long long)s.numKvHeads, (long long)s.headDim, impl, fwdMs, fwd,
              bwdMs, both);
}

/// "S,B,H,KV,D" as a Shape, or exits naming the flag.
Shape parseShape(const std::string &text) {
  long long seq = 0, batch = 0, heads = 0, kvHeads = 0, dim = 0;
  if (std::sscanf(text.c_str(), "%lld,%lld,%lld,%lld,%lld", &seq, &batch,
                  &heads, &kvHeads, &dim) != 5 ||
      seq <= 0 || batch <= 0 || kvHeads <= 0 || heads % kvHeads != 0 ||
      dim <= 0) {
    std::fprintf(stderr,
                 "sharc-attention-bench: --shape %s: expected S,B,H,KV,D "
                 "with KV dividing H\n",
                 text.c_str());
    std::exit(2);
  }
  return {seq, batch, heads, kvHeads, dim};
}

} // namespace

int main(int argc, char **argv) {
  int warmup = 5, iters = 20;
  // MiniMind's shapes (heads 8/4, dim 96) at the throughput points' global
  // batch 4 on one GPU, and the compute-bound point's (32/8, dim 128).
  std::vector<Shape> shapes = {{2048, 4, 8, 4, 96},
                               {8192, 1, 8, 4, 96},
                               {4096, 4, 32, 8, 128},
                               {4096, 4, 16, 4, 128}};
  bool shapesGiven = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--warmup")
      warmup = std::atoi(argv[i + 1]);
    else if (flag == "--iters")
      iters = std::atoi(argv[i + 1]);
    else if (flag == "--shape") {
      if (!shapesGiven)
        shapes.clear();
      shapesGiven = true;
      shapes.push_back(parseShape(argv[i + 1]));
    } else {
      std::fprintf(stderr,
                   "sharc-attention-bench: unknown flag %s (expected "
                   "--warmup, --iters or --shape)\n",
                   flag.c_str());
      return 2;
    }
  }
  if (argc % 2 == 0) {
    std::fprintf(stderr, "sharc-attention-bench: %s needs a value\n",
                 argv[argc - 1]);
    return 2;
  }
  std::mt19937 rng(7);
  for (const Shape &s : shapes) {
    Buffers b = allocate(s, rng);
    AttentionArgs fwd = forwardArgs(s, b);
    AttentionGradArgs bwd = backwardArgs(s, b);
    // Every backward reads the lse its own implementation's forward wrote.
    double ms =
        timeMs([&] { return cuda::attention(fwd, nullptr); }, warmup, iters);
    double bwdMs = timeMs([&] { return cuda::attentionGrad(bwd, nullptr); },
                          warmup, iters);
    report(s, "sharc (mma.sync)", ms, bwdMs);
#if SHARC_WITH_CUDNN
    for (bool deterministic : {false, true}) {
      auto engine = cuda::CudnnAttention::create(nullptr, deterministic);
      check(engine.status(), "cuDNN handle");
      auto fwdBytes = (*engine)->prepare(fwd);
      check(fwdBytes.status(), "cuDNN forward graph");
      auto bwdBytes = (*engine)->prepare(bwd);
      check(bwdBytes.status(), "cuDNN backward graph");
      void *workspace = nullptr;
      checkCuda(cudaMalloc(&workspace, std::max<int64_t>(
                                           1, std::max(*fwdBytes, *bwdBytes))),
                "cudaMalloc");
      double cudnnFwd =
          timeMs([&] { return (*engine)->run(fwd, workspace); }, warmup, iters);
      double cudnnBwd =
          timeMs([&] { return (*engine)->run(bwd, workspace); }, warmup, iters);
      report(s, deterministic ? "cuDNN (deterministic)" : "cuDNN", cudnnFwd,
             cudnnBwd);
      // Beside the compiler's estimate (plan/DeviceWorkspace.h).
      int64_t estimate = plan::cudnnAttentionGradBytes(
          s.seqLen * s.batch * s.numHeads * s.headDim,
          s.batch * s.numHeads * s.seqLen);
      std::printf("    cuDNN workspace: forward %lld, backward %lld bytes "
                  "(sharc's estimate %lld)\n",
                  (long long)*fwdBytes, (long long)*bwdBytes,
                  (long long)estimate);
      cudaFree(workspace);
    }
#endif
    release(b);
  }
  return 0;
}
